package providers

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-ai/switchboard/graphs"
)

// TestCallsReuseConnections makes streamed and plain calls one after the
// other and checks that they all go over one connection: a provider call
// that left its connection unusable would pay a new TCP (and, for a real
// provider, TLS) handshake before every first token.
func TestCallsReuseConnections(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept") != "text/event-stream" {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range []string{
			`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"hi"},"finish_reason":null}]}`,
			`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
			`[DONE]`,
		} {
			fmt.Fprintf(w, "data: %s\n\n", ev)
			w.(http.Flusher).Flush()
			time.Sleep(time.Millisecond) // the end of the body comes in a packet of its own
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	p := graphs.Provider{Name: "fake", Kind: graphs.ProviderOpenAI, BaseURL: srv.URL, APIKey: "sk-test", Timeout: 5 * time.Second}
	r, err := New(map[string]graphs.Provider{"fake": p}, fastOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	// Two races made this test open 2 connections for 6 calls once in CI
	// (-race, packages in parallel), and it is about neither. The server
	// ends each body a millisecond after [DONE], which on a loaded machine
	// can come after drainWait, when the connection is dropped as it
	// should be: the window has tests of its own (TestStreamEndsAtDone,
	// TestLateDrainCancelSparesReusedConnection), and is widened here.
	r.upstreams[0].drainWait = time.Minute
	// And net/http puts a connection back in its pool from a goroutine of
	// its own, a moment after the body has ended: a call made at once
	// can dial a second connection. So each call waits until its
	// connection is back (which a drain that does not read to the body's
	// end never lets happen).
	idle := make(chan struct{}, 1)
	ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{PutIdleConn: func(err error) {
		if err == nil {
			idle <- struct{}{}
		}
	}})
	for i := range 6 {
		stream := i%3 != 2
		resp, err := r.Chat(ctx, userRequest("hello", stream), nil)
		if err != nil {
			t.Fatalf("call %d (stream %v): %v", i, stream, err)
		}
		if resp.Message.Content != "hi" {
			t.Fatalf("call %d answered %q, want %q", i, resp.Message.Content, "hi")
		}
		select {
		case <-idle:
		case <-time.After(10 * time.Second):
			t.Fatalf("call %d (stream %v): its connection never went back to the pool", i, stream)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("6 calls opened %d connections, want 1", n)
	}
}

// TestStreamEndsAtDone checks that a server which keeps the body open after
// [DONE] does not hold the answer back: the stream is whole at [DONE].
func TestStreamEndsAtDone(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	p := graphs.Provider{Name: "fake", Kind: graphs.ProviderOpenAI, BaseURL: srv.URL, APIKey: "sk-test", Timeout: 5 * time.Second,
		StreamIdleTimeout: time.Minute}
	r, err := New(map[string]graphs.Provider{"fake": p}, fastOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	done := make(chan error, 1)
	go func() {
		resp, err := r.Chat(t.Context(), userRequest("hello", true), nil)
		if err == nil && resp.Message.Content != "hi" {
			err = fmt.Errorf("answer %q, want %q", resp.Message.Content, "hi")
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call waited for the end of a body left open after [DONE]")
	}
}

// TestLateDrainCancelSparesReusedConnection: a stream's drain gives its
// connection back to the pool when the body ends, and its drainWait timer
// may still fire (t.Stop loses the race) and cancel the finished call's
// context after another call has taken that connection over. That cancel
// must not cut the other call. The server ends each body after [DONE] a
// little before, at or a little after drainWait, so that both the late
// timer and reuse happen, over a few connections with calls back to back
// (the timer firing when the drain has just ended is the same as the
// deferred cancel every call makes when it returns: net/http stops watching
// a request's context once its body has ended and its connection is idle).
// Every call must get its whole answer.
func TestLateDrainCancelSparesReusedConnection(t *testing.T) {
	const workers, calls = 4, 40
	var conns, served atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"hi"},"finish_reason":null}]}`+"\n\n")
		w.(http.Flusher).Flush()
		fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" there"},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
		w.(http.Flusher).Flush()
		// The end of the body: at once for every other call (which is
		// sure to give its connection back), else from a little inside
		// drainWait to just past it.
		var hold time.Duration
		if n := served.Add(1); n%2 == 1 {
			hold = drainWait - 6*time.Millisecond + time.Duration(n/2%8)*time.Millisecond
		}
		select {
		case <-time.After(hold):
		case <-r.Context().Done():
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	p := graphs.Provider{Name: "fake", Kind: graphs.ProviderOpenAI, BaseURL: srv.URL, APIKey: "sk-test", Timeout: 5 * time.Second}
	r, err := New(map[string]graphs.Provider{"fake": p}, fastOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)

	errs := make(chan error, workers*calls)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				resp, err := r.Chat(t.Context(), userRequest("hello", true), nil)
				if err == nil && resp.Message.Content != "hi there" {
					err = fmt.Errorf("answer %q, want %q", resp.Message.Content, "hi there")
				}
				if err != nil {
					errs <- fmt.Errorf("call %d: %w", i, err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// Reuse must have happened, or the test proved nothing.
	if n := conns.Load(); n > workers*calls*3/4 {
		t.Errorf("%d calls opened %d connections: too little reuse to test", workers*calls, n)
	}
	t.Logf("%d calls over %d connections", workers*calls, conns.Load())
}
