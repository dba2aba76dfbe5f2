package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
)

// upstream is the process's HTTP handler: the control API under /_control
// and, for every other path, a reverse proxy to the current fake. The fake
// package listens on its own loopback port; proxying to it keeps one
// address for clients and lets a reset swap in a fresh fake (the package
// has no way to forget its script or its recorded requests).
type upstream struct {
	mux   *http.ServeMux
	proxy *httputil.ReverseProxy

	mu   sync.Mutex
	fake *fakeupstream.Server // nil once closed
}

// newUpstream starts an upstream with an empty script; Close stops it.
func newUpstream() *upstream {
	u := &upstream{fake: fakeupstream.Start()}
	u.proxy = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u.target())
		},
		// Stream chunks must reach the client as the fake writes them.
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return // the client went away; nobody to answer
			}
			writeJSON(w, http.StatusBadGateway, map[string]any{"error": map[string]any{
				"message": "fakeupstream proxy: " + err.Error(), "type": "server_error", "param": nil, "code": nil,
			}})
		},
	}
	u.mux = http.NewServeMux()
	u.mux.HandleFunc("POST /_control/script", u.handleScript)
	u.mux.HandleFunc("GET /_control/requests", u.handleRequests)
	u.mux.HandleFunc("POST /_control/reset", u.handleReset)
	u.mux.HandleFunc("/_control/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no control route " + r.Method + " " + r.URL.Path})
	})
	u.mux.HandleFunc("/", u.forward)
	return u
}

// forward proxies a request to the current fake in full duplex. Without it
// the server, as it sends the response's first bytes, discards and closes
// what the handler has not read of the request body; but the proxy's
// transport is still reading that body in its own goroutine (one last
// read, to see EOF, after it has sent every byte). If the fake's answer
// comes back before that read, the read fails, the transport closes the
// fake's connection and the stream being copied from it is cut: "unexpected
// EOF" for the client. It took a loaded machine for it to show (see
// proxy_test.go); bench/revproxy does the same for the same reason.
func (u *upstream) forward(w http.ResponseWriter, r *http.Request) {
	_ = http.NewResponseController(w).EnableFullDuplex()
	u.proxy.ServeHTTP(w, r)
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) { u.mux.ServeHTTP(w, r) }

// Close stops the current fake, releasing any hanging reply. It may be
// called more than once.
func (u *upstream) Close() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.fake != nil {
		u.fake.Close()
		u.fake = nil
	}
}

// current is the fake in use, or nil once closed.
func (u *upstream) current() *fakeupstream.Server {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.fake
}

// target is the base URL (without /v1) the proxy forwards to.
func (u *upstream) target() *url.URL {
	base := "http://127.0.0.1:1" // closed: nothing listens there, the proxy answers 502
	if f := u.current(); f != nil {
		base = strings.TrimSuffix(f.URL, "/v1")
	}
	t, _ := url.Parse(base)
	return t
}

// scriptReply is the JSON form of one scripted reply.
type scriptReply struct {
	Text         string              `json:"text"`
	Refusal      string              `json:"refusal"`
	ToolCalls    []scriptToolCall    `json:"tool_calls"`
	FinishReason string              `json:"finish_reason"`
	Usage        *fakeupstream.Usage `json:"usage"`
	Status       int                 `json:"status"`
	RetryAfter   string              `json:"retry_after"`
	DelayMS      int                 `json:"delay_ms"`
	ChunkDelayMS int                 `json:"chunk_delay_ms"`
	StreamChunks []string            `json:"stream_chunks"`
	Together     bool                `json:"together"`
	Hang         bool                `json:"hang"`
	Abort        bool                `json:"abort"`
	StreamError  string              `json:"stream_error"`
	// Echo answers the text of the request's last user message.
	Echo bool `json:"echo"`
}

// scriptToolCall is one scripted tool call. Arguments may be a JSON string
// (sent as is, so a test can script malformed arguments) or any other JSON
// value (sent encoded).
type scriptToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// reply converts r to the package's Reply.
func (r scriptReply) reply() (fakeupstream.Reply, error) {
	if r.Echo {
		return fakeupstream.Reply{Func: fakeupstream.Echo}, nil
	}
	out := fakeupstream.Reply{
		Text:         r.Text,
		Refusal:      r.Refusal,
		FinishReason: r.FinishReason,
		Usage:        r.Usage,
		Status:       r.Status,
		RetryAfter:   r.RetryAfter,
		Delay:        time.Duration(r.DelayMS) * time.Millisecond,
		ChunkDelay:   time.Duration(r.ChunkDelayMS) * time.Millisecond,
		StreamChunks: r.StreamChunks,
		Together:     r.Together,
		Hang:         r.Hang,
		Abort:        r.Abort,
		StreamError:  r.StreamError,
	}
	for i, c := range r.ToolCalls {
		args := "{}"
		if raw := bytes.TrimSpace(c.Arguments); len(raw) > 0 {
			args = string(raw)
			if raw[0] == '"' {
				if err := json.Unmarshal(raw, &args); err != nil {
					return fakeupstream.Reply{}, fmt.Errorf("tool_calls[%d].arguments: %w", i, err)
				}
			}
		}
		if c.ID == "" || c.Name == "" {
			return fakeupstream.Reply{}, fmt.Errorf("tool_calls[%d]: id and name are required", i)
		}
		out.ToolCalls = append(out.ToolCalls, fakeupstream.ToolCall{ID: c.ID, Name: c.Name, Arguments: args})
	}
	return out, nil
}

// handleScript appends a JSON array of replies to the script. Unknown
// fields are refused so that a misspelt option fails the test that used it.
func (u *upstream) handleScript(w http.ResponseWriter, r *http.Request) {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	var script []scriptReply
	if err := dec.Decode(&script); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "script must be a JSON array of replies: " + err.Error()})
		return
	}
	replies := make([]fakeupstream.Reply, 0, len(script))
	for i, s := range script {
		rep, err := s.reply()
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("reply %d: %v", i, err)})
			return
		}
		replies = append(replies, rep)
	}
	f := u.current()
	if f == nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "fakeupstream is closed"})
		return
	}
	f.Push(replies...)
	writeJSON(w, http.StatusOK, map[string]int{"added": len(replies)})
}

// recordedRequest is the JSON form of one recorded request.
type recordedRequest struct {
	Path string `json:"path"`
	// Body is the parsed JSON body, or the raw body as a string when it
	// is not JSON.
	Body     json.RawMessage `json:"body"`
	Headers  http.Header     `json:"headers"`
	Canceled bool            `json:"canceled"`
}

// handleRequests lists every request received since the last reset.
func (u *upstream) handleRequests(w http.ResponseWriter, r *http.Request) {
	out := []recordedRequest{}
	if f := u.current(); f != nil {
		for _, req := range f.Requests() {
			body := json.RawMessage(req.Body)
			if !json.Valid(req.Body) {
				body, _ = json.Marshal(string(req.Body))
			}
			canceled := false
			select {
			case <-req.Canceled:
				canceled = true
			default:
			}
			out = append(out, recordedRequest{Path: req.Path, Body: body, Headers: req.Header, Canceled: canceled})
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// handleReset forgets the script and the recorded requests by swapping in
// a fresh fake; replies still hanging on the old one are released.
func (u *upstream) handleReset(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	old := u.fake
	if old == nil {
		u.mu.Unlock()
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "fakeupstream is closed"})
		return
	}
	u.fake = fakeupstream.Start()
	u.mu.Unlock()
	old.Close()
	writeJSON(w, http.StatusOK, map[string]bool{"reset": true})
}

// writeJSON writes v as a JSON response.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"encoding the response failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
