package upstream_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
)

// A stream whose upstream connection dies after text reached the client
// ends with an SSE error event then [DONE], and is not retried: the client
// has already seen part of the answer.
func TestStreamDiesMidway(t *testing.T) {
	t.Parallel()
	r := start(t, setup{})
	r.fake.Push(
		fakeupstream.Reply{StreamChunks: []string{"Hello ", "wor"}, Abort: true},
		fakeupstream.Reply{Text: "a retry must not happen"},
	)
	s := readStream(t, r.gw.Chat(chatBody("desk", "hello", true), nil))
	if s.text != "Hello wor" {
		t.Errorf("streamed text %q, want the deltas sent before the failure, %q", s.text, "Hello wor")
	}
	e := s.errorEvent(t)
	if e == nil {
		t.Fatalf("no error event in the stream: %+v", s.chunks)
	}
	if e.Error.Code != "upstream_error" || e.Error.Type != "server_error" || e.Error.Message == "" {
		t.Errorf("error event %+v, want code upstream_error", e.Error)
	}
	for i, c := range s.chunks {
		for _, ch := range c.Choices {
			if ch.FinishReason != nil {
				t.Errorf("chunk %d finishes with %q: a broken stream must not look complete", i, *ch.FinishReason)
			}
		}
	}
	if n := len(r.fake.Requests()); n != 1 {
		t.Errorf("upstream got %d requests, want 1: no retry after the first byte", n)
	}
}

// An upstream that sends an error event inside an open stream is reported
// the same way.
func TestStreamErrorEvent(t *testing.T) {
	t.Parallel()
	r := start(t, setup{})
	r.fake.Push(
		fakeupstream.Reply{StreamChunks: []string{"Thinking"}, StreamError: "model overloaded"},
		fakeupstream.Reply{Text: "a retry must not happen"},
	)
	s := readStream(t, r.gw.Chat(chatBody("desk", "hello", true), nil))
	if s.text != "Thinking" {
		t.Errorf("streamed text %q", s.text)
	}
	e := s.errorEvent(t)
	if e == nil || e.Error.Code != "upstream_error" {
		t.Fatalf("error event %+v, want upstream_error", e)
	}
	if n := len(r.fake.Requests()); n != 1 {
		t.Errorf("upstream got %d requests, want 1", n)
	}
}

// A non-streamed answer whose body is cut after the headers is a 502, not a
// half answer, and is not retried (the provider may have done the work).
func TestBodyCutMidway(t *testing.T) {
	t.Parallel()
	r := start(t, setup{})
	r.fake.Push(fakeupstream.Reply{Text: "a complete answer, cut in half", Abort: true}, fakeupstream.Reply{Text: "a retry"})
	wantError(t, r.gw.Chat(chatBody("desk", "hello", false), nil), http.StatusBadGateway, "upstream_error")
	if n := len(r.fake.Requests()); n != 1 {
		t.Errorf("upstream got %d requests, want 1", n)
	}
}

// A stream that ends cleanly but early, with neither a finish reason nor
// data: [DONE] (an upstream that died behind a proxy, or a body delimited by
// the connection's close), is a broken answer, not a complete one: the
// client must get the error event rather than a finish_reason "stop".
func TestStreamEndsWithoutDone(t *testing.T) {
	t.Parallel()
	r := start(t, setup{raw: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, d := range []string{`{"role":"assistant","content":""}`, `{"content":"The total is "}`, `{"content":"4"}`} {
			_, _ = w.Write([]byte(`data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":` + d + `,"finish_reason":null}]}` + "\n\n"))
		}
		// The handler returns: the body ends without a finish chunk or [DONE].
	})})
	s := readStream(t, r.gw.Chat(chatBody("raw", "what is 2+2, times 10?", true), nil))
	if s.text != "The total is 4" {
		t.Errorf("streamed text %q", s.text)
	}
	for i, c := range s.chunks {
		for _, ch := range c.Choices {
			if ch.FinishReason != nil {
				t.Errorf("chunk %d finishes with %q: a truncated answer is passed off as complete", i, *ch.FinishReason)
			}
		}
	}
	if e := s.errorEvent(t); e == nil || e.Error.Code != "upstream_error" {
		t.Errorf("error event %+v, want upstream_error", e)
	}
}

// A stream that stalls after its first delta, longer than the provider's
// stream_idle_timeout, ends with an upstream_timeout error event then
// [DONE]; it is not retried.
func TestStreamStallsMidway(t *testing.T) {
	t.Parallel()
	r := start(t, setup{})
	r.fake.Push(
		fakeupstream.Reply{StreamChunks: []string{"Hel", "lo"}, ChunkDelay: 3 * time.Second},
		fakeupstream.Reply{Text: "a retry must not happen"},
	)
	start := time.Now()
	s := readStream(t, r.gw.Chat(chatBody("stall", "hello", true), nil))
	if s.text != "Hel" {
		t.Errorf("streamed text %q, want %q", s.text, "Hel")
	}
	if e := s.errorEvent(t); e == nil || e.Error.Code != "upstream_timeout" {
		t.Fatalf("error event %+v, want upstream_timeout", e)
	}
	if waited := time.Since(start); waited > 2500*time.Millisecond {
		t.Errorf("the stall was cut after %v, not by the 300ms idle timeout", waited)
	}
	if n := len(r.fake.Requests()); n != 1 {
		t.Errorf("upstream got %d requests, want 1", n)
	}
}
