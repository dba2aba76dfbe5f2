package providers

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/runtime"
)

// fuzzCallBound is how long one fuzzed call may take. The body is sent at
// once and ends, so any wait at all is a hang; the bound is generous for
// busy fuzz workers, and under the idle timeout so that a hang is not
// hidden by it.
const fuzzCallBound = 5 * time.Second

// FuzzStreamParse serves arbitrary bytes as the body of a 200 event-stream
// answer to a streamed call. The call must return, without panicking, either
// an answer consistent with the deltas it streamed or a provider error.
//
// The seed corpus in testdata/fuzz/FuzzStreamParse/ runs with plain
// `go test`; fuzz for longer with:
//
//	go test ./providers -run '^$' -fuzz '^FuzzStreamParse$' -fuzztime 10m
func FuzzStreamParse(f *testing.F) {
	reg, err := New(map[string]graphs.Provider{
		"fuzz": {Name: "fuzz", Kind: graphs.ProviderOpenAI, BaseURL: "http://fuzz.invalid/v1", Timeout: 2 * fuzzCallBound},
	}, Options{MaxRetries: -1, IdleStreamTimeout: 2 * fuzzCallBound})
	if err != nil {
		f.Fatal(err)
	}
	// Answers come from memory rather than a socket, so the fuzzer spends
	// its time in the stream parser; everything above the HTTP client (the
	// attempt, go-openai, the accumulator, error mapping) is the real path.
	var body atomic.Pointer[[]byte]
	reg.upstreams[0].httpc = &http.Client{Transport: roundTripFunc(func(req *http.Request) (*http.Response, error) {
		_ = req.Body.Close()
		return &http.Response{
			StatusCode: http.StatusOK,
			Status:     "200 OK",
			Proto:      "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header:  http.Header{"Content-Type": {"text/event-stream"}},
			Body:    io.NopCloser(bytes.NewReader(*body.Load())),
			Request: req,
		}, nil
	})}

	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		body.Store(&stream)
		req := &runtime.ChatRequest{
			Model:    graphs.ModelRef{Provider: "fuzz", Model: "m"},
			Messages: runtime.PromptOf(runtime.Message{Role: runtime.RoleUser, Content: "hi"}),
			Stream:   true,
		}
		type result struct {
			resp   *runtime.ChatResponse
			err    error
			deltas []string
		}
		done := make(chan result, 1)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			var r result
			r.resp, r.err = reg.Chat(ctx, req, func(d string) { r.deltas = append(r.deltas, d) })
			done <- r
		}()
		var r result
		select {
		case r = <-done:
		case <-time.After(fuzzCallBound):
			cancel()
			<-done
			t.Fatalf("the call did not return within %v of a complete body", fuzzCallBound)
		}
		if r.err != nil {
			if r.resp != nil {
				t.Fatalf("returned both an answer and %v", r.err)
			}
			var pe *Error
			if !errors.As(r.err, &pe) || pe.Provider != "fuzz" ||
				!(errors.Is(r.err, runtime.ErrUpstream) || errors.Is(r.err, runtime.ErrUpstreamTimeout)) {
				t.Fatalf("err = %#v, want a provider *Error wrapping ErrUpstream or ErrUpstreamTimeout", r.err)
			}
			return
		}
		if r.resp == nil {
			t.Fatal("no answer and no error")
		}
		m := r.resp.Message
		if m.Role != runtime.RoleAssistant || r.resp.FinishReason == "" {
			t.Fatalf("answer role %q finish %q", m.Role, r.resp.FinishReason)
		}
		if got := strings.Join(r.deltas, ""); got != m.Content {
			t.Fatalf("streamed %q but answered %q", got, m.Content)
		}
		// A call may come without an id (some local models omit them): the
		// runtime gives it one (fillCallIDs), the one place ids are made.
		// An id the answer does carry must be one the upstream sent.
		for i, c := range m.ToolCalls {
			if c.Type != "function" {
				t.Fatalf("tool call %d = %+v, want type function", i, c)
			}
			if c.ID != "" && !bytes.Contains(stream, []byte(c.ID)) {
				t.Fatalf("tool call %d has id %q, which the stream never sent", i, c.ID)
			}
		}
	})
}

// roundTripFunc is an http.RoundTripper made of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

// RoundTrip calls f.
func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
