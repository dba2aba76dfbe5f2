package providers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	openai "github.com/sashabaranov/go-openai"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
	"github.com/switchboard-ai/switchboard/internal/testenv"
	"github.com/switchboard-ai/switchboard/runtime"
)

func TestRetries(t *testing.T) {
	ok := fakeupstream.Reply{Text: "finally"}
	tests := []struct {
		name         string
		script       []fakeupstream.Reply
		opts         func(*Options)
		ctxTimeout   time.Duration
		wantRequests int
		wantErr      error  // nil: success
		wantStatus   int    // of the *Error
		wantText     string // in the error text
	}{
		{name: "500 then success", script: []fakeupstream.Reply{{Status: 500}, ok}, wantRequests: 2},
		{name: "502, 503 then success", script: []fakeupstream.Reply{{Status: 502}, {Status: 503}, ok}, wantRequests: 3},
		{name: "429 with retry-after-ms then success", wantRequests: 2, script: []fakeupstream.Reply{
			{Status: 429, Header: http.Header{"Retry-After-Ms": {"20"}}}, ok}},
		{name: "429 with Retry-After then success", wantRequests: 2, script: []fakeupstream.Reply{
			{Status: 429, RetryAfter: "0"}, ok}},
		{name: "gives up after MaxRetries", script: []fakeupstream.Reply{{Status: 500, Text: "boom"}, {Status: 500, Text: "boom"}, {Status: 500, Text: "still boom"}, ok},
			wantRequests: 3, wantErr: runtime.ErrUpstream, wantStatus: 500, wantText: "provider fake: status 500: still boom"},
		{name: "retries disabled", script: []fakeupstream.Reply{{Status: 500}, ok}, opts: func(o *Options) { o.MaxRetries = -1 },
			wantRequests: 1, wantErr: runtime.ErrUpstream, wantStatus: 500},
		{name: "400 is not retried", script: []fakeupstream.Reply{{Status: 400, Text: "bad tools"}, ok},
			wantRequests: 1, wantErr: runtime.ErrUpstream, wantStatus: 400, wantText: "provider fake: status 400: bad tools"},
		{name: "401 is not retried", script: []fakeupstream.Reply{{Status: 401}, ok},
			wantRequests: 1, wantErr: runtime.ErrUpstream, wantStatus: 401},
		{name: "Retry-After beyond the deadline is not waited for", script: []fakeupstream.Reply{{Status: 429, RetryAfter: "5"}, ok},
			ctxTimeout: time.Second, wantRequests: 1, wantErr: runtime.ErrUpstream, wantStatus: 429},
	}
	// Every case streamed and not: a stream's attempt is sent by other
	// code (call.openStream) and must fail and retry alike.
	for _, tc := range tests {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", tc.name, stream), func(t *testing.T) {
				s := fakeupstream.New(t, tc.script...)
				opts := fastOptions()
				if tc.opts != nil {
					tc.opts(&opts)
				}
				r := newTestRegistry(t, s, opts, nil)
				ctx := t.Context()
				if tc.ctxTimeout > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tc.ctxTimeout)
					defer cancel()
				}
				resp, err := r.Chat(ctx, userRequest("hi", stream), nil)
				if n := len(s.Requests()); n != tc.wantRequests {
					t.Errorf("upstream got %d requests, want %d", n, tc.wantRequests)
				}
				if tc.wantErr == nil {
					if err != nil {
						t.Fatal(err)
					}
					if resp.Message.Content != "finally" {
						t.Errorf("content %q", resp.Message.Content)
					}
					return
				}
				if !errors.Is(err, tc.wantErr) || errors.Is(err, runtime.ErrUpstreamTimeout) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				var pe *Error
				if !errors.As(err, &pe) || pe.StatusCode != tc.wantStatus || pe.Provider != "fake" {
					t.Errorf("err = %#v, want a *Error with status %d", err, tc.wantStatus)
				}
				if !strings.Contains(err.Error(), tc.wantText) {
					t.Errorf("err = %q, want it to contain %q", err, tc.wantText)
				}
			})
		}
	}
}

func TestNoRetryAfterFirstByte(t *testing.T) {
	tests := []struct {
		name       string
		reply      fakeupstream.Reply
		stream     bool
		wantDeltas []string
		wantText   string
	}{
		{name: "stream dies after a delta", reply: fakeupstream.Reply{StreamChunks: []string{"half an ", "answer"}, Abort: true},
			stream: true, wantDeltas: []string{"half an ", "answer"}, wantText: "connection closed before the answer ended"},
		{name: "stream error event", reply: fakeupstream.Reply{StreamChunks: []string{"so"}, StreamError: "model overloaded"},
			stream: true, wantDeltas: []string{"so"}, wantText: "model overloaded"},
		{name: "body cut after the headers", reply: fakeupstream.Reply{Text: "a complete answer", Abort: true},
			wantText: "connection closed before the answer ended"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := fakeupstream.New(t, tc.reply, fakeupstream.Reply{Text: "must not be fetched"})
			r := newTestRegistry(t, s, fastOptions(), nil)
			var d deltas
			_, err := r.Chat(t.Context(), userRequest("hi", tc.stream), d.add)
			if !errors.Is(err, runtime.ErrUpstream) || !strings.Contains(err.Error(), tc.wantText) {
				t.Errorf("err = %v, want ErrUpstream containing %q", err, tc.wantText)
			}
			if n := len(s.Requests()); n != 1 {
				t.Errorf("upstream got %d requests, want 1", n)
			}
			if diff := cmp.Diff(tc.wantDeltas, d.got); diff != "" {
				t.Errorf("deltas (-want +got):\n%s", diff)
			}
		})
	}
}

func TestProviderTimeout(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "non-streamed", true: "streamed"}[stream], func(t *testing.T) {
			s := fakeupstream.New(t, fakeupstream.Reply{Delay: time.Minute})
			r := newTestRegistry(t, s, fastOptions(), func(p *graphs.Provider) { p.Timeout = 100 * time.Millisecond })
			_, err := r.Chat(t.Context(), userRequest("hi", stream), nil)
			if !errors.Is(err, runtime.ErrUpstreamTimeout) || errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want ErrUpstreamTimeout and not context.Canceled", err)
			}
			// Usually "no answer within 100ms"; the transport's response
			// header timeout, equal to it, may fire first.
			var pe *Error
			if !errors.As(err, &pe) || pe.Provider != "fake" || pe.StatusCode != 0 {
				t.Errorf("err = %#v, want a *Error for provider fake", err)
			}
			if n := len(s.Requests()); n != 1 {
				t.Errorf("upstream got %d requests, want 1 (a timeout is not retried)", n)
			}
			waitCanceled(t, s.Requests()[0])
		})
	}
}

func TestProviderTimeoutBoundsAWholeStream(t *testing.T) {
	// A stream that never stalls long enough for the idle timeout but never
	// ends either (issue 23: a delta every 0.5s forever held the session)
	// fails at the provider's timeout, which spans the whole call.
	chunks := make([]string, 200)
	for i := range chunks {
		chunks[i] = "tick "
	}
	s := fakeupstream.New(t, fakeupstream.Reply{StreamChunks: chunks, ChunkDelay: 20 * time.Millisecond})
	opts := fastOptions()
	opts.IdleStreamTimeout = time.Minute
	r := newTestRegistry(t, s, opts, func(p *graphs.Provider) { p.Timeout = 300 * time.Millisecond })
	var d deltas
	_, err := r.Chat(t.Context(), userRequest("hi", true), d.add)
	if !errors.Is(err, runtime.ErrUpstreamTimeout) || !strings.Contains(err.Error(), "provider fake: no complete answer within 300ms") {
		t.Fatalf("err = %v, want ErrUpstreamTimeout for a stream longer than the timeout", err)
	}
	if len(d.got) == 0 || len(d.got) == len(chunks) {
		t.Errorf("%d deltas before the timeout, want some and not all", len(d.got))
	}
	waitCanceled(t, s.Requests()[0])
}

func TestIdleStreamTimeout(t *testing.T) {
	s := fakeupstream.New(t, fakeupstream.Reply{StreamChunks: []string{"first", "never"}, ChunkDelay: time.Minute})
	opts := fastOptions()
	opts.IdleStreamTimeout = 100 * time.Millisecond
	r := newTestRegistry(t, s, opts, nil)
	var d deltas
	_, err := r.Chat(t.Context(), userRequest("hi", true), d.add)
	if !errors.Is(err, runtime.ErrUpstreamTimeout) || !strings.Contains(err.Error(), "provider fake: stream idle for 100ms") {
		t.Fatalf("err = %v, want ErrUpstreamTimeout for an idle stream", err)
	}
	if diff := cmp.Diff([]string{"first"}, d.got); diff != "" {
		t.Errorf("deltas (-want +got):\n%s", diff)
	}
	if n := len(s.Requests()); n != 1 {
		t.Errorf("upstream got %d requests, want 1", n)
	}
	waitCanceled(t, s.Requests()[0])
}

func TestCallerCancel(t *testing.T) {
	tests := []struct {
		name   string
		reply  fakeupstream.Reply
		stream bool
	}{
		{"non-streamed, waiting for the answer", fakeupstream.Reply{Hang: true}, false},
		{"streamed, waiting for headers", fakeupstream.Reply{Hang: true}, true},
		{"streamed, mid-stream", fakeupstream.Reply{StreamChunks: []string{"a", "b"}, ChunkDelay: time.Minute}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := fakeupstream.New(t, tc.reply)
			r := newTestRegistry(t, s, fastOptions(), nil)
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() {
				_, err := r.Chat(ctx, userRequest("hi", tc.stream), nil)
				done <- err
			}()
			req := waitRequest(t, s, 1)
			cancel()
			err := <-done
			if !errors.Is(err, context.Canceled) || errors.Is(err, runtime.ErrUpstream) || errors.Is(err, runtime.ErrUpstreamTimeout) {
				t.Errorf("err = %v, want context.Canceled only", err)
			}
			waitCanceled(t, req)
			if n := len(s.Requests()); n != 1 {
				t.Errorf("upstream got %d requests, want 1", n)
			}
		})
	}
}

func TestCallerDeadlineIsATimeout(t *testing.T) {
	s := fakeupstream.New(t, fakeupstream.Reply{Hang: true})
	r := newTestRegistry(t, s, fastOptions(), nil)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err := r.Chat(ctx, userRequest("hi", false), nil)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, runtime.ErrUpstreamTimeout) {
		t.Errorf("err = %v, want DeadlineExceeded and ErrUpstreamTimeout", err)
	}
}

// TestConnectionRefused also compares a stream's error with a whole
// answer's: a stream's request is sent without net/http's client
// (call.openStream), and fails with the error the client would make.
func TestConnectionRefused(t *testing.T) {
	addr := testenv.RefusingAddr(t)
	r, err := New(map[string]graphs.Provider{"down": {Kind: graphs.ProviderOpenAI, BaseURL: "http://" + addr + "/v1"}}, fastOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var texts []string
	for _, stream := range []bool{false, true} {
		req := userRequest("hi", stream)
		req.Model.Provider = "down"
		_, err = r.Chat(t.Context(), req, nil)
		if !errors.Is(err, runtime.ErrUpstream) || errors.Is(err, runtime.ErrUpstreamTimeout) || !strings.Contains(err.Error(), "connection refused") {
			t.Errorf("stream=%v: err = %v, want ErrUpstream for a refused connection", stream, err)
		}
		var ue *url.Error
		if !errors.As(err, &ue) || ue.Op != "Post" || ue.URL != "http://"+addr+"/v1/chat/completions" {
			t.Errorf("stream=%v: err = %#v, want it to wrap net/http's *url.Error for POST /v1/chat/completions", stream, err)
		}
		texts = append(texts, err.Error())
	}
	if texts[0] != texts[1] {
		t.Errorf("a stream failed with %q, a whole answer with %q", texts[1], texts[0])
	}
}

func TestUnknownProvider(t *testing.T) {
	r, err := New(nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Chat(t.Context(), userRequest("hi", false), nil)
	if !errors.Is(err, runtime.ErrUpstream) || !strings.Contains(err.Error(), "provider fake: provider not configured") {
		t.Errorf("err = %v", err)
	}
	if r.Has("fake") {
		t.Error("Has reports an unconfigured provider")
	}
}

func TestNewRejectsBadProviders(t *testing.T) {
	tests := []struct {
		name string
		p    graphs.Provider
		want string
	}{
		{"unknown kind", graphs.Provider{Kind: "grpc", BaseURL: "http://x"}, `provider "p": unknown kind "grpc"`},
		{"no base url", graphs.Provider{Kind: graphs.ProviderOpenAI}, `provider "p": base_url is required`},
		{"not http", graphs.Provider{BaseURL: "ftp://x/v1"}, `provider "p": base_url "ftp://x/v1" is not an http(s) URL`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(map[string]graphs.Provider{"p": tc.p}, Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestRetryAfterParsing(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		header http.Header
		want   time.Duration
		ok     bool
	}{
		{"none", http.Header{}, 0, false},
		{"seconds", http.Header{"Retry-After": {"2"}}, 2 * time.Second, true},
		{"capped", http.Header{"Retry-After": {"120"}}, 10 * time.Second, true},
		{"ms wins", http.Header{"Retry-After": {"2"}, "Retry-After-Ms": {"150"}}, 150 * time.Millisecond, true},
		{"http date", http.Header{"Retry-After": {now.Add(3 * time.Second).Format(http.TimeFormat)}}, 3 * time.Second, true},
		{"garbage", http.Header{"Retry-After": {"soon"}}, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := retryAfter(tc.header, now)
			if got != tc.want || ok != tc.ok {
				t.Errorf("retryAfter = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestStreamAssemblyWithoutIndex(t *testing.T) {
	// Some servers send tool call deltas without an index, or whole calls
	// in one chunk; calls are then told apart by id.
	idx := func(i int) *int { return &i }
	chunks := []openai.ChatCompletionStreamResponse{
		{ID: "x", Choices: []openai.ChatCompletionStreamChoice{{Delta: openai.ChatCompletionStreamChoiceDelta{ToolCalls: []openai.ToolCall{
			{ID: "a", Function: openai.FunctionCall{Name: "one", Arguments: `{"k":`}},
		}}}}},
		{Choices: []openai.ChatCompletionStreamChoice{{Delta: openai.ChatCompletionStreamChoiceDelta{ToolCalls: []openai.ToolCall{
			{Function: openai.FunctionCall{Arguments: `1}`}},
			{ID: "b", Function: openai.FunctionCall{Name: "two", Arguments: `{}`}},
		}}}}},
		{Choices: []openai.ChatCompletionStreamChoice{{Delta: openai.ChatCompletionStreamChoiceDelta{ToolCalls: []openai.ToolCall{
			{Index: idx(5), ID: "c", Function: openai.FunctionCall{Name: "three"}},
		}}}}},
		{Choices: []openai.ChatCompletionStreamChoice{{FinishReason: "tool_calls"}}},
	}
	var acc streamAcc
	for i := range chunks {
		acc.add(&chunks[i], nil)
	}
	got, err := acc.result()
	if err != nil {
		t.Fatal(err)
	}
	want := []runtime.ToolCall{
		{ID: "a", Type: "function", Function: runtime.FunctionCall{Name: "one", Arguments: `{"k":1}`}},
		{ID: "b", Type: "function", Function: runtime.FunctionCall{Name: "two", Arguments: `{}`}},
		{ID: "c", Type: "function", Function: runtime.FunctionCall{Name: "three"}},
	}
	if diff := cmp.Diff(want, got.Message.ToolCalls); diff != "" {
		t.Errorf("tool calls (-want +got):\n%s", diff)
	}
}

func TestEmptyStreamIsAnError(t *testing.T) {
	var acc streamAcc
	if _, err := acc.result(); !errors.Is(err, errEmptyStream) {
		t.Errorf("err = %v", err)
	}
}

func TestConcurrentCalls(t *testing.T) {
	s := fakeupstream.New(t)
	s.SetFallback(fakeupstream.Echo)
	r := newTestRegistry(t, s, fastOptions(), nil)
	const n = 32
	errs := make(chan error, n)
	for i := range n {
		go func() {
			want := fmt.Sprintf("message number %d", i)
			var d deltas
			resp, err := r.Chat(t.Context(), userRequest(want, i%2 == 0), d.add)
			switch {
			case err != nil:
				errs <- err
			case resp.Message.Content != want:
				errs <- fmt.Errorf("call %d got %q", i, resp.Message.Content)
			case i%2 == 0 && strings.Join(d.got, "") != want:
				errs <- fmt.Errorf("call %d streamed %q", i, d.got)
			default:
				errs <- nil
			}
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// TestStreamAsksForNoCompression: a streamed call asks for an identity
// body, so that net/http keeps no header map of its own for gzip with the
// request for the stream's life; a whole answer may still come gzipped.
func TestStreamAsksForNoCompression(t *testing.T) {
	s := fakeupstream.New(t)
	s.SetFallback(fakeupstream.Echo)
	r := newTestRegistry(t, s, fastOptions(), nil)
	for _, stream := range []bool{true, false} {
		var d deltas
		if _, err := r.Chat(t.Context(), userRequest("hi", stream), d.add); err != nil {
			t.Fatal(err)
		}
	}
	reqs := s.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	if got := reqs[0].Header.Get("Accept-Encoding"); got != "identity" {
		t.Errorf("streamed call: Accept-Encoding %q, want identity", got)
	}
	if got := reqs[1].Header.Get("Accept-Encoding"); got != "gzip" {
		t.Errorf("whole call: Accept-Encoding %q, want net/http's gzip", got)
	}
}

// pacedStream is a provider whose stream sends one chunk "c" after each of
// gaps, then, when stall is set, sends nothing more until the client goes
// away, else ends.
func pacedStream(t *testing.T, gaps []time.Duration, stall bool) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		for _, gap := range gaps {
			select {
			case <-time.After(gap):
			case <-r.Context().Done():
				return
			}
			fmt.Fprint(w, `data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"content":"c"}}]}`+"\n\n")
			w.(http.Flusher).Flush()
		}
		if stall {
			<-r.Context().Done()
			return
		}
		fmt.Fprint(w, `data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(s.Close)
	return s
}

// TestStreamIdleAndDeadlineShareATimer checks the call's one timer (issue
// 22): events that each come within the idle timeout keep a stream open
// past it, a stall after events fails as idle from the last event, and the
// call's deadline cuts a stream in time whether its events keep coming or
// it stalls shortly before the deadline.
func TestStreamIdleAndDeadlineShareATimer(t *testing.T) {
	every := func(n int, gap time.Duration) []time.Duration {
		g := make([]time.Duration, n)
		for i := range g {
			g[i] = gap
		}
		return g
	}
	tests := []struct {
		name          string
		gaps          []time.Duration
		stall         bool
		idle, timeout time.Duration
		want          string // "" for a whole answer
		// the call must end no sooner than minTook, and before maxTook
		minTook, maxTook time.Duration
		wantDeltas       int // -1: some, not all
	}{
		{name: "events within the idle timeout", gaps: every(8, 60*time.Millisecond),
			idle: 200 * time.Millisecond, timeout: time.Minute, minTook: 480 * time.Millisecond, maxTook: 5 * time.Second, wantDeltas: 8},
		{name: "a stall after events is idle from the last", gaps: every(5, 60*time.Millisecond), stall: true,
			idle: 200 * time.Millisecond, timeout: time.Minute, want: "stream idle for 200ms",
			minTook: 500 * time.Millisecond, maxTook: 5 * time.Second, wantDeltas: 5},
		{name: "the deadline cuts events that keep coming", gaps: every(100, 40*time.Millisecond),
			idle: 200 * time.Millisecond, timeout: 600 * time.Millisecond, want: "no complete answer within 600ms",
			minTook: 600 * time.Millisecond, maxTook: 3 * time.Second, wantDeltas: -1},
		{name: "a stall shortly before the deadline is a timeout", gaps: []time.Duration{0, 300 * time.Millisecond}, stall: true,
			idle: 700 * time.Millisecond, timeout: 900 * time.Millisecond, want: "no complete answer within 900ms",
			minTook: 900 * time.Millisecond, maxTook: 3 * time.Second, wantDeltas: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := pacedStream(t, tc.gaps, tc.stall)
			opts := fastOptions()
			opts.IdleStreamTimeout = tc.idle
			r, err := New(map[string]graphs.Provider{"fake": {Name: "fake", Kind: graphs.ProviderOpenAI, BaseURL: s.URL, APIKey: "sk-test", Timeout: tc.timeout}}, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			var d deltas
			start := time.Now()
			_, err = r.Chat(t.Context(), userRequest("hi", true), d.add)
			took := time.Since(start)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("err = %v, want a whole answer", err)
			case tc.want != "" && (!errors.Is(err, runtime.ErrUpstreamTimeout) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err = %v, want ErrUpstreamTimeout with %q", err, tc.want)
			}
			if took < tc.minTook || took >= tc.maxTook {
				t.Errorf("the call took %s, want at least %s and under %s", took, tc.minTook, tc.maxTook)
			}
			if n := len(d.got); tc.wantDeltas >= 0 && n != tc.wantDeltas || tc.wantDeltas < 0 && (n == 0 || n == len(tc.gaps)) {
				t.Errorf("%d deltas, want %d (-1: some, not all)", n, tc.wantDeltas)
			}
		})
	}
}
