package upstream_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
)

// Failures before the first byte of an answer are retried (429, 5xx) or not
// (other 4xx); either way a stream that has sent nothing yet still gets a
// proper HTTP status.
func TestProviderErrors(t *testing.T) {
	tests := []struct {
		name         string
		script       []fakeupstream.Reply
		wantRequests int
		wantStatus   int
		wantCode     string // error code, when not 200
		wantText     string // reply text, when 200
	}{
		{
			name:         "500, 500 then 200 is retried",
			script:       []fakeupstream.Reply{{Status: 500}, {Status: 500}, {Text: "recovered"}},
			wantRequests: 3, wantStatus: http.StatusOK, wantText: "recovered",
		},
		{
			name:         "502 then 503 then 200 is retried",
			script:       []fakeupstream.Reply{{Status: 502}, {Status: 503}, {Text: "recovered"}},
			wantRequests: 3, wantStatus: http.StatusOK, wantText: "recovered",
		},
		{
			name:         "500 three times gives up after two retries",
			script:       []fakeupstream.Reply{{Status: 500}, {Status: 500}, {Status: 500}, {Text: "too late"}},
			wantRequests: 3, wantStatus: http.StatusBadGateway, wantCode: "upstream_error",
		},
		{
			name:         "400 is not retried",
			script:       []fakeupstream.Reply{{Status: 400, Text: "unsupported parameter"}, {Text: "never asked"}},
			wantRequests: 1, wantStatus: http.StatusBadGateway, wantCode: "upstream_error",
		},
		{
			name:         "401 is not retried",
			script:       []fakeupstream.Reply{{Status: 401, Text: "bad key"}, {Text: "never asked"}},
			wantRequests: 1, wantStatus: http.StatusBadGateway, wantCode: "upstream_error",
		},
	}
	for _, tc := range tests {
		for _, stream := range []bool{false, true} {
			name := tc.name
			if stream {
				name += "/streamed"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				r := start(t, setup{})
				r.fake.Push(tc.script...)
				resp := r.gw.Chat(chatBody("desk", "hello", stream), nil)
				if tc.wantStatus == http.StatusOK {
					if got := replyText(t, resp, stream); got != tc.wantText {
						t.Errorf("reply %q, want %q", got, tc.wantText)
					}
				} else {
					wantError(t, resp, tc.wantStatus, tc.wantCode)
				}
				reqs := r.fake.Requests()
				if len(reqs) != tc.wantRequests {
					t.Errorf("upstream got %d requests, want %d", len(reqs), tc.wantRequests)
				}
				// A retry resends the same request.
				for i, req := range reqs[1:] {
					if string(req.Body) != string(reqs[0].Body) {
						t.Errorf("request %d differs from the first:\n%s\n%s", i+1, req.Body, reqs[0].Body)
					}
				}
			})
		}
	}
}

// A 429 with Retry-After: 1 is retried no sooner than the provider asked.
func TestRetryAfterHonoured(t *testing.T) {
	t.Parallel()
	r := start(t, setup{})
	var mu sync.Mutex
	var arrived []time.Time
	at := func(reply fakeupstream.Reply) fakeupstream.Reply {
		return fakeupstream.Reply{Func: func(fakeupstream.Request) fakeupstream.Reply {
			mu.Lock()
			arrived = append(arrived, time.Now())
			mu.Unlock()
			return reply
		}}
	}
	r.fake.Push(at(fakeupstream.Reply{Status: 429, RetryAfter: "1", Text: "slow down"}), at(fakeupstream.Reply{Text: "thanks for waiting"}))
	resp := r.gw.Chat(chatBody("desk", "hello", false), nil)
	if got := replyText(t, resp, false); got != "thanks for waiting" {
		t.Errorf("reply %q", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(arrived) != 2 {
		t.Fatalf("upstream got %d requests, want 2", len(arrived))
	}
	// The default backoff would be 125-250ms; only Retry-After waits 1s.
	if gap := arrived[1].Sub(arrived[0]); gap < 900*time.Millisecond {
		t.Errorf("retried after %v, want >= ~1s as Retry-After asked", gap)
	}
}

// A provider nobody listens on fails at once with 502, without waiting out
// the provider's timeout.
func TestConnectionRefused(t *testing.T) {
	for _, stream := range []bool{false, true} {
		name := "plain"
		if stream {
			name = "streamed"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := start(t, setup{})
			begin := time.Now()
			resp := r.gw.Chat(chatBody("dead", "anyone there?", stream), nil)
			took := time.Since(begin)
			wantError(t, resp, http.StatusBadGateway, "upstream_error")
			if !strings.Contains(string(resp.Body), "dead") {
				t.Errorf("error does not name the provider: %s", resp.Body)
			}
			// The provider's timeout is 10s; two quick retries are fine.
			if took > 5*time.Second {
				t.Errorf("refused connection answered after %v: it should not wait for the 10s timeout", took)
			}
		})
	}
}

// An upstream slower than the provider's timeout gives 504, and the call to
// it is cancelled rather than left running.
func TestProviderTimeout(t *testing.T) {
	for _, stream := range []bool{false, true} {
		name := "plain"
		if stream {
			name = "streamed"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := start(t, setup{timeout: "300ms"})
			r.fake.Push(fakeupstream.Reply{Delay: 10 * time.Second, Text: "too late"}, fakeupstream.Reply{Text: "never asked"})
			begin := time.Now()
			resp := r.gw.Chat(chatBody("desk", "hello", stream), nil)
			took := time.Since(begin)
			wantError(t, resp, http.StatusGatewayTimeout, "upstream_timeout")
			// Not a speed check: only that the 300ms timeout, not the
			// upstream's 10s, ended the call.
			if took >= 5*time.Second {
				t.Errorf("answered after %v: the gateway waited for the slow upstream", took)
			}
			reqs := r.fake.Requests()
			if len(reqs) != 1 {
				t.Fatalf("upstream got %d requests, want 1 (the timeout bounds the whole call)", len(reqs))
			}
			select {
			case <-reqs[0].Canceled:
			case <-time.After(2 * time.Second):
				t.Error("the timed-out upstream call was not cancelled")
			}
		})
	}
}

// max_retries: 0 turns retries off for a provider: its first failure is
// the client's 502.
func TestMaxRetriesZero(t *testing.T) {
	t.Parallel()
	r := start(t, setup{})
	r.fake.Push(fakeupstream.Reply{Status: 500, Text: "boom"}, fakeupstream.Reply{Text: "a retry must not happen"})
	wantError(t, r.gw.Chat(chatBody("oneshot", "hello", false), nil), http.StatusBadGateway, "upstream_error")
	if n := len(r.fake.Requests()); n != 1 {
		t.Errorf("upstream got %d requests, want 1", n)
	}
}
