package providers

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	goruntime "runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/internal/testenv"
	"github.com/switchboard-ai/switchboard/runtime"
)

// The hostile upstreams of issue 23, each answered with a bounded 502 (or
// 504) whose text names no address, no credential and no prompt.

// hostile serves h as an OpenAI base URL and returns a registry on it.
func hostile(t *testing.T, h http.HandlerFunc, edit func(*graphs.Provider), opts Options) *Registry {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	if opts.RetryBaseDelay == 0 {
		opts.RetryBaseDelay = time.Millisecond
	}
	p := graphs.Provider{Name: "fake", Kind: graphs.ProviderOpenAI, BaseURL: srv.URL + "/v1", APIKey: "sk-test-Secret0123456789", Timeout: 10 * time.Second}
	if edit != nil {
		edit(&p)
	}
	r, err := New(map[string]graphs.Provider{"fake": p}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

// allocated runs f and returns the bytes it (and anything else running)
// allocated.
func allocated(f func()) uint64 {
	goruntime.GC()
	var before, after goruntime.MemStats
	goruntime.ReadMemStats(&before)
	f()
	goruntime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// filler is what a hostile body is made of, written from one buffer so the
// server side allocates next to nothing.
var filler = bytes.Repeat([]byte("a"), 64<<10)

// writeN writes n filler bytes.
func writeN(w io.Writer, n int) {
	for n > 0 {
		k := min(n, len(filler))
		if _, err := w.Write(filler[:k]); err != nil {
			return
		}
		n -= k
	}
}

func TestAnswerOverMaxResponseBytesFails(t *testing.T) {
	const limit = 1 << 20
	const huge = 100 << 20 // issue 23: one 100 MB completion took 420 MB
	for _, tc := range []struct {
		name          string
		stream        bool
		contentLength bool
		handler       func(w http.ResponseWriter)
		// maxAlloc bounds what the call allocates, in limits: a stream's
		// events are each decoded (garbage, never held), so reading its
		// limit allocates more than reading one body does.
		maxAlloc uint64
	}{
		{name: "non-streamed", handler: func(w http.ResponseWriter) {
			io.WriteString(w, `{"id":"x","object":"chat.completion","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"`)
			writeN(w, huge)
			io.WriteString(w, `"}}]}`)
		}},
		{name: "non-streamed with its length announced", contentLength: true, handler: func(w http.ResponseWriter) {
			w.Header().Set("Content-Length", strconv.Itoa(huge))
			writeN(w, huge)
		}},
		{name: "one SSE line of 10 MB", stream: true, handler: func(w http.ResponseWriter) {
			io.WriteString(w, `data: {"id":"x","choices":[{"index":0,"delta":{"content":"`)
			writeN(w, 10<<20)
			io.WriteString(w, "\"}}]}\n\n")
		}},
		{name: "many small events", stream: true, maxAlloc: 24, handler: func(w http.ResponseWriter) {
			for i := 0; i < 100000; i++ {
				if _, err := io.WriteString(w, `data: {"id":"x","choices":[{"index":0,"delta":{"content":"`+string(filler[:100])+"\"}}]}\n\n"); err != nil {
					return
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := hostile(t, func(w http.ResponseWriter, _ *http.Request) {
				if tc.stream {
					w.Header().Set("Content-Type", "text/event-stream")
				}
				tc.handler(w)
			}, func(p *graphs.Provider) { p.MaxResponseBytes = limit }, Options{})
			var err error
			alloc := allocated(func() { _, err = r.Chat(t.Context(), userRequest("hi", tc.stream), nil) })
			var pe *Error
			if !errors.As(err, &pe) || !errors.Is(err, runtime.ErrUpstream) || !strings.Contains(err.Error(), "response too large") {
				t.Fatalf("err = %v, want a 502 upstream error saying response too large", err)
			}
			// Reading stopped at the bound: what was allocated is a small
			// multiple of the limit, not of the 10-100 MB sent.
			if tc.maxAlloc == 0 {
				tc.maxAlloc = 8
			}
			if alloc > tc.maxAlloc*limit {
				t.Errorf("allocated %d MiB for an answer cut at %d MiB", alloc>>20, limit>>20)
			}
		})
	}
}

func TestLargeAnswerMemoryIsAboutItsSize(t *testing.T) {
	// An answer under the bound is decoded once from one buffer of its
	// size. go-openai's json.Decoder (a doubling buffer, then the copies)
	// allocated about 4x the body; here it is the body plus its content.
	const size = 8 << 20
	content := strings.Repeat("b", size)
	body := []byte(`{"id":"x","object":"chat.completion","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"` + content + `"}}]}`)
	for _, announce := range []bool{true, false} {
		t.Run(fmt.Sprintf("content-length %v", announce), func(t *testing.T) {
			r := hostile(t, func(w http.ResponseWriter, _ *http.Request) {
				if announce {
					w.Header().Set("Content-Length", strconv.Itoa(len(body)))
				}
				w.Write(body)
			}, nil, Options{})
			var resp *runtime.ChatResponse
			var err error
			alloc := allocated(func() { resp, err = r.Chat(t.Context(), userRequest("hi", false), nil) })
			if err != nil || len(resp.Message.Content) != size {
				t.Fatalf("err %v", err)
			}
			ratio := float64(alloc) / float64(len(body))
			t.Logf("allocated %.2fx the body", ratio)
			want := 2.5 // the body buffer and the content string
			if !announce {
				want = 3.5 // the chunks, the buffer, the content string
			}
			if ratio > want {
				t.Errorf("allocated %.2fx the body, want at most %.1fx", ratio, want)
			}
		})
	}
}

func BenchmarkLargeAnswer(b *testing.B) {
	body := []byte(`{"id":"x","object":"chat.completion","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"` + strings.Repeat("b", 4<<20) + `"}}]}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(body) }))
	defer srv.Close()
	r, err := New(map[string]graphs.Provider{"fake": {Name: "fake", Kind: graphs.ProviderOpenAI, BaseURL: srv.URL, Timeout: 10 * time.Second}}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Chat(b.Context(), userRequest("hi", false), nil); err != nil {
			b.Fatal(err)
		}
	}
}

func TestProviderErrorTextIsScrubbed(t *testing.T) {
	const key = "sk-test-Secret0123456789"
	const prompt = "my card number is 4111 1111 1111 1111 and my pin is 9876"
	echoAuth := func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s (Authorization: %s)","type":"invalid_request_error"}}`,
			key, r.Header.Get("Authorization"))
	}
	echoBody := func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.WriteHeader(http.StatusInternalServerError)
		w.Write([]byte("internal error while processing: "))
		w.Write(b)
	}
	echoInMessage := func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":{"message":"content policy: %q is not allowed","type":"invalid_request_error"}}`, prompt)
	}
	echoInStream := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: {\"error\":{\"message\":\"failed on %s with key=%s\"}}\n\n", prompt, key)
	}
	for _, tc := range []struct {
		name    string
		h       http.HandlerFunc
		stream  bool
		capture bool
		want    string
	}{
		{"401 echoing the key", echoAuth, false, false, "status 401: Incorrect API key provided: xxxxx (Authorization: Bearer xxxxx)"},
		{"500 echoing the request", echoBody, false, false, "status 500: the provider's error text quotes the request"},
		{"500 echoing the request, capture on", echoBody, false, true, "status 500: internal error while processing"},
		{"400 quoting the prompt", echoInMessage, false, false, "status 400: the provider's error text quotes the request"},
		{"stream error event", echoInStream, true, false, "stream error: the provider's error text quotes the request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := hostile(t, tc.h, func(p *graphs.Provider) { p.MaxRetries = ptr(0) }, Options{CaptureContent: tc.capture})
			_, err := r.Chat(t.Context(), userRequest(prompt, tc.stream), nil)
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.want) {
				t.Errorf("err = %q, want it to contain %q", msg, tc.want)
			}
			if strings.Contains(msg, "Secret0123456789") {
				t.Errorf("the provider key reached the error: %q", msg)
			}
			if !tc.capture && strings.Contains(msg, "4111") {
				t.Errorf("the prompt reached the error: %q", msg)
			}
		})
	}
}

func TestClientErrorsNameNoAddress(t *testing.T) {
	closed := "http://" + testenv.RefusingAddr(t) + "/v1"
	// A server that resets every connection once the request is in.
	reset := func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		conn.(*net.TCPConn).SetLinger(0)
		conn.Close()
	}
	for _, tc := range []struct {
		name string
		h    http.HandlerFunc
		base string
		want string
	}{
		{"connection refused", nil, closed, "provider fake unreachable (connection refused)"},
		{"name not resolved", nil, "http://no-such-host.invalid/v1", "provider fake unreachable (name not resolved)"},
		{"connection reset", reset, "", "provider fake: connection"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.h
			if h == nil {
				h = func(http.ResponseWriter, *http.Request) {}
			}
			r := hostile(t, h, func(p *graphs.Provider) {
				p.MaxRetries = ptr(0)
				if tc.base != "" {
					p.BaseURL = tc.base
				}
			}, Options{})
			_, err := r.Chat(t.Context(), userRequest("hi", false), nil)
			if err == nil || !errors.Is(err, runtime.ErrUpstream) {
				t.Fatalf("err = %v", err)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, tc.want) || strings.Contains(msg, "127.0.0.1") || strings.Contains(msg, "tcp") {
				t.Errorf("err = %q, want %q... naming no address", msg, tc.want)
			}
		})
	}
}
