// Package fakeupstream is a scripted fake OpenAI-compatible upstream for
// tests: an httptest server that answers POST /v1/chat/completions with the
// replies a test scripts, streamed or not, exactly in OpenAI's wire shape,
// and records every request it receives.
package fakeupstream

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Server is a running fake upstream. Its methods are safe for concurrent use.
type Server struct {
	// URL is the base URL to configure clients with; it ends in /v1.
	URL string

	srv       *httptest.Server
	closing   chan struct{}
	closeOnce sync.Once

	mu       sync.Mutex
	script   []Reply
	fallback func(Request) Reply
	strict   bool
	requests []Request
	// arrived is closed and replaced whenever a request is recorded, so
	// that WaitRequests can wake up.
	arrived chan struct{}
	seq     int
}

// New starts a server that answers with script, in order, and closes it
// when the test ends.
func New(t testing.TB, script ...Reply) *Server {
	t.Helper()
	s := Start(script...)
	t.Cleanup(s.Close)
	return s
}

// Start starts a server that answers with script, in order, outside a
// test (the standalone cmd/fakeupstream uses it); the caller must Close it.
func Start(script ...Reply) *Server {
	s := &Server{
		closing: make(chan struct{}),
		script:  append([]Reply(nil), script...),
		arrived: make(chan struct{}),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.handleChat)
	mux.HandleFunc("POST /chat/completions", s.handleChat)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("fakeupstream: no route for %s %s", r.Method, r.URL.Path))
	})
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL + "/v1"
	return s
}

// Push appends replies to the script; each request takes the first one left.
func (s *Server) Push(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, replies...)
}

// SetFallback sets the reply for requests that find the script empty, for
// load tests and benchmarks; nil restores the default, a 500 saying
// "fakeupstream: script exhausted".
func (s *Server) SetFallback(f func(r Request) Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fallback = f
}

// Requests returns every request received so far, in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// WaitRequests waits until at least n requests have arrived and returns
// them all; it fails when ctx ends first.
func (s *Server) WaitRequests(ctx context.Context, n int) ([]Request, error) {
	for {
		s.mu.Lock()
		got, arrived := len(s.requests), s.arrived
		if got >= n {
			reqs := append([]Request(nil), s.requests...)
			s.mu.Unlock()
			return reqs, nil
		}
		s.mu.Unlock()
		select {
		case <-arrived:
		case <-ctx.Done():
			return nil, fmt.Errorf("fakeupstream: %d of %d requests arrived: %w", got, n, ctx.Err())
		}
	}
}

// Close releases any hanging reply and shuts the server down, waiting for
// its handlers to return. It may be called more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.closing)
		s.srv.CloseClientConnections()
		s.srv.Close()
	})
}

// record stores a request and picks its reply. A request that a strict
// server refuses does not use up a scripted reply.
func (s *Server) record(req Request) (Reply, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, req)
	close(s.arrived)
	s.arrived = make(chan struct{})
	s.seq++
	var reply Reply
	if s.strict {
		if problem := strictProblem(req.Body); problem != "" {
			return Reply{Status: http.StatusBadRequest, Text: "fakeupstream strict: " + problem}, s.seq
		}
	}
	switch {
	case len(s.script) > 0:
		reply = s.script[0]
		s.script = s.script[1:]
	case s.fallback != nil:
		reply = Reply{Func: s.fallback}
	default:
		reply = Reply{Status: http.StatusInternalServerError, Text: "fakeupstream: script exhausted"}
	}
	return reply, s.seq
}

// handleChat answers one chat completion request.
func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "fakeupstream: reading body: "+err.Error())
		return
	}
	// The request context also ends once the handler has returned; only an
	// end while the handler still runs means the client went away. The
	// deferred check covers a handler that saw ctx.Done before AfterFunc's
	// goroutine ran (stop would then prevent it from ever running).
	canceled := make(chan struct{})
	var once sync.Once
	markCanceled := func() { once.Do(func() { close(canceled) }) }
	stop := context.AfterFunc(r.Context(), markCanceled)
	defer func() {
		stop()
		if r.Context().Err() != nil {
			markCanceled()
		}
	}()

	req := Request{Path: r.URL.Path, Body: body, Header: r.Header.Clone(), Canceled: canceled}
	parseErr := json.Unmarshal(body, &req.Parsed)
	reply, seq := s.record(req)
	if parseErr != nil {
		writeError(w, http.StatusBadRequest, "fakeupstream: invalid JSON body: "+parseErr.Error())
		return
	}
	if reply.Func != nil {
		reply = reply.Func(req)
	}
	a := answer{w: w, ctx: r.Context(), closing: s.closing, req: &req.Parsed, reply: reply, id: fmt.Sprintf("chatcmpl-fake-%d", seq)}
	a.serve()
}
