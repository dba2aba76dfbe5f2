package ops_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
)

// limitedConfig serves the desk graph with one key, acme, whose limits
// are the YAML flow mapping limits, on store.
func limitedConfig(fakeURL, store, limits string) string {
	return strings.Replace(deskConfig(fakeURL, "desk"), "server:\n", fmt.Sprintf(`store: {url: %q}
server:
  api_keys:
    - name: %s
      key: acme-key
      limits: %s
    - name: free
      key: free-key
`, store, "acme-"+rand.Text()[:8], limits), 1)
}

// A key over its requests per minute gets 429 rate_limit_exceeded with
// Retry-After and OpenAI's x-ratelimit-* headers, counted across two
// gateways on one Redis; a key without limits is not held back.
func TestRequestLimitAcrossTwoGateways(t *testing.T) {
	needRedis(t)
	fake := fakeupstream.New(t)
	fake.SetFallback(fakeupstream.Echo)
	// The principal's name is unique per run: the shared Redis keeps counts.
	yaml := limitedConfig(fake.URL, "redis://127.0.0.1:6379/0", "{requests_per_minute: 3}")
	a := start(t, yaml)
	b := start(t, yaml)
	checkRequestLimit(t, []string{a.URL, b.URL})
}

// The memory store counts in its one gateway.
func TestRequestLimitInMemory(t *testing.T) {
	fake := fakeupstream.New(t)
	fake.SetFallback(fakeupstream.Echo)
	p := start(t, limitedConfig(fake.URL, "memory://", "{requests_per_minute: 3}"))
	checkRequestLimit(t, []string{p.URL})
}

func checkRequestLimit(t *testing.T, urls []string) {
	t.Helper()
	ctx := context.Background()
	for i := range 3 {
		r := chat(ctx, t, urls[i%len(urls)], "acme-key", "desk", "hello")
		if r.Status != http.StatusOK {
			t.Fatalf("request %d: %v", i, r)
		}
		want := map[string]string{
			"X-Ratelimit-Limit-Requests":     "3",
			"X-Ratelimit-Remaining-Requests": strconv.Itoa(2 - i),
		}
		for k, v := range want {
			if got := r.Header.Get(k); got != v {
				t.Errorf("request %d: %s = %q, want %q", i, k, got, v)
			}
		}
		if reset := r.Header.Get("X-Ratelimit-Reset-Requests"); !validReset(reset) {
			t.Errorf("request %d: x-ratelimit-reset-requests = %q", i, reset)
		}
	}
	over := chat(ctx, t, urls[len(urls)-1], "acme-key", "desk", "one too many")
	if over.Status != http.StatusTooManyRequests || over.code() != "rate_limit_exceeded" {
		t.Fatalf("the fourth request: %v, want 429 rate_limit_exceeded", over)
	}
	var body struct {
		Error struct {
			Type    string  `json:"type"`
			Message string  `json:"message"`
			Param   *string `json:"param"`
		} `json:"error"`
	}
	if err := json.Unmarshal(over.Body, &body); err != nil || body.Error.Type != "requests" || body.Error.Message == "" {
		t.Errorf("429 body %s (%v): want OpenAI's shape with type requests", over.Body, err)
	}
	if ra, err := strconv.Atoi(over.Header.Get("Retry-After")); err != nil || ra < 1 || ra > 20 {
		t.Errorf("Retry-After = %q, want 1..20 seconds", over.Header.Get("Retry-After"))
	}
	if got := over.Header.Get("X-Ratelimit-Remaining-Requests"); got != "0" {
		t.Errorf("429: x-ratelimit-remaining-requests = %q, want 0", got)
	}
	if got := over.Header.Get("X-Ratelimit-Limit-Requests"); got != "3" {
		t.Errorf("429: x-ratelimit-limit-requests = %q, want 3", got)
	}
	// Every /v1 route counts and answers 429 alike.
	if r := do(ctx, t, http.MethodGet, urls[0]+"/v1/models", "acme-key", nil); r.Status != http.StatusTooManyRequests {
		t.Errorf("GET /v1/models over the limit: %v", r)
	}
	// A key without limits gets neither 429 nor headers.
	free := chat(ctx, t, urls[0], "free-key", "desk", "hello")
	if free.Status != http.StatusOK || free.Header.Get("X-Ratelimit-Limit-Requests") != "" {
		t.Errorf("a key without limits: %v %v", free, free.Header)
	}
}

// validReset reads an OpenAI reset time: a Go duration such as "20s",
// "1m0s" or "150ms".
func validReset(s string) bool {
	d, err := time.ParseDuration(s)
	return err == nil && d > 0 && d <= time.Minute
}

// Tokens are charged once a run is over: the run that crosses the limit is
// answered, the next request is refused with type tokens.
func TestTokenLimit(t *testing.T) {
	fake := fakeupstream.New(t)
	fake.SetFallback(fakeupstream.Echo) // 15 tokens per call
	p := start(t, limitedConfig(fake.URL, "memory://", "{tokens_per_minute: 20, tokens_per_day: 1000}"))
	ctx := context.Background()
	first := chat(ctx, t, p.URL, "acme-key", "desk", "one")
	second := chat(ctx, t, p.URL, "acme-key", "desk", "two")
	if first.Status != http.StatusOK || second.Status != http.StatusOK {
		t.Fatalf("runs under the limit: %v; %v", first, second)
	}
	if got := first.Header.Get("X-Ratelimit-Remaining-Tokens"); got != "20" {
		t.Errorf("first run: x-ratelimit-remaining-tokens = %q, want 20 (nothing used yet)", got)
	}
	if got := second.Header.Get("X-Ratelimit-Remaining-Tokens"); got != "5" {
		t.Errorf("second run: x-ratelimit-remaining-tokens = %q, want 5 (15 used)", got)
	}
	third := chat(ctx, t, p.URL, "acme-key", "desk", "three")
	if third.Status != http.StatusTooManyRequests || third.code() != "rate_limit_exceeded" || !strings.Contains(string(third.Body), `"type":"tokens"`) {
		t.Errorf("over the tokens: %v, want 429 rate_limit_exceeded of type tokens", third)
	}
	if n := len(fake.Requests()); n != 2 {
		t.Errorf("the upstream saw %d calls, want 2: a refused request runs nothing", n)
	}
}

// A limited key's 405, and its 404 for a route that does not exist, carry
// the x-ratelimit-* headers too (CONTRACT §13: "on every reply of a
// limited key"), on /v1 and on /mcp, and count as a request as every other
// one does.
func TestMethodNotAllowedCarriesRateHeaders(t *testing.T) {
	fake := fakeupstream.New(t)
	p := start(t, limitedConfig(fake.URL, "memory://", "{requests_per_minute: 5}"))
	ctx := context.Background()
	for i, target := range []struct{ method, path string }{
		{http.MethodDelete, "/v1/chat/completions"},
		{http.MethodGet, "/mcp"},
		{http.MethodPut, "/v1/models"},
		{http.MethodGet, "/v1/nonexistent"},
	} {
		r := do(ctx, t, target.method, p.URL+target.path, "acme-key", nil)
		if want := map[bool]int{false: http.StatusMethodNotAllowed, true: http.StatusNotFound}[target.path == "/v1/nonexistent"]; r.Status != want || (want == http.StatusMethodNotAllowed && r.code() != "method_not_allowed") {
			t.Errorf("%s %s: %v", target.method, target.path, r)
		}
		if got, want := r.Header.Get("X-Ratelimit-Remaining-Requests"), strconv.Itoa(4-i); r.Header.Get("X-Ratelimit-Limit-Requests") != "5" || got != want {
			t.Errorf("%s %s: x-ratelimit-*-requests %q/%q, want 5/%s", target.method, target.path,
				r.Header.Get("X-Ratelimit-Limit-Requests"), got, want)
		}
	}
	if r := do(ctx, t, http.MethodGet, p.URL+"/mcp", "", nil); r.Status != http.StatusUnauthorized {
		t.Errorf("GET /mcp without a key: %v", r)
	}
}
