package gateway_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
	"github.com/switchboard-ai/switchboard/internal/gwtest"
)

// boundedPassthrough is the desk with passthrough on, a key acme limited
// to 100 tokens a minute, and the provider's answers bounded to 5,000
// bytes and its streams' gaps to 1 s.
func boundedPassthrough(t *testing.T, replies ...fakeupstream.Reply) (*gwtest.Gateway, *fakeupstream.Server) {
	t.Helper()
	fake := fakeupstream.New(t, replies...)
	yaml := strings.Replace(deskYAML, "server:\n  listen: 127.0.0.1:0\n", `server:
  listen: 127.0.0.1:0
  passthrough: true
  api_keys:
    - {name: acme, key: key-acme, limits: {tokens_per_minute: 100}}
`, 1)
	yaml = strings.Replace(yaml, "    timeout: 5s\n", "    timeout: 5s\n    max_response_bytes: 5000\n    stream_idle_timeout: 1s\n", 1)
	return gwtest.Start(t, yaml, map[string]string{"FAKE_URL": fake.URL, "TOOLS_URL": "http://127.0.0.1:1"}), fake
}

// rawChat posts body to gw with acme's key, streamed, and returns the
// status, what was read of the body and the error that ended reading it.
func rawChat(t *testing.T, gw *gwtest.Gateway, body map[string]any) (int, string, error) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, gw.URL+"/v1/chat/completions", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer key-acme")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err) // no answer at all: a stream is cut short only once its status left
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(got), err
}

// A proxied call is bounded as a graph's provider call is (CONTRACT §14):
// an answer over max_response_bytes is 502 "response too large" when it
// comes whole, and a stream that grows past it, or goes quiet for longer
// than stream_idle_timeout, is cut short, so that its client sees it fail
// instead of end.
func TestPassthroughBounds(t *testing.T) {
	long := make([]string, 30)
	for i := range long {
		long[i] = strings.Repeat("y", 500)
	}
	gw, _ := boundedPassthrough(t,
		fakeupstream.Reply{Text: strings.Repeat("x", 20000)},
		fakeupstream.Reply{StreamChunks: long},
		fakeupstream.Reply{StreamChunks: []string{"a", "b", "c"}, ChunkDelay: 3 * time.Second},
		fakeupstream.Reply{StreamChunks: []string{"fine"}},
	)
	acmeKey := map[string]string{"Authorization": "Bearer key-acme"}
	r := gw.Chat(gwtest.User("fake/plain", "a long answer"), acmeKey)
	if r.Status != http.StatusBadGateway || r.ErrorCode(t) != "upstream_error" || !strings.Contains(string(r.Body), "response too large") {
		t.Errorf("an answer over max_response_bytes: %d %.300s", r.Status, r.Body)
	}
	for _, what := range []string{"a stream over max_response_bytes", "a stream gone idle"} {
		body := gwtest.User("fake/plain", what)
		body["stream"] = true
		status, got, err := rawChat(t, gw, body)
		if status == http.StatusBadGateway && strings.Contains(got, "response too large") && what != "a stream gone idle" {
			// Its first read was over the limit already (the provider's
			// chunks came together): nothing had left, and the client is
			// told why.
			continue
		}
		if status != http.StatusOK || err == nil || strings.Contains(got, "[DONE]") {
			t.Errorf("%s: status %d, read error %v, body ends %q: want it cut short", what, status, err, got[max(0, len(got)-80):])
		}
	}
	body := gwtest.User("fake/plain", "a fine stream")
	body["stream"] = true
	if status, got, err := rawChat(t, gw, body); status != http.StatusOK || err != nil || !strings.HasSuffix(got, "data: [DONE]\n\n") {
		t.Errorf("a stream within its bounds: %d %v %q", status, err, got)
	}
}

// A proxied call's tokens count against the key's token limits (CONTRACT
// §13), whole or streamed with its usage; a request the gateway's graphs
// would refuse is proxied as is, and the session header stays with the
// gateway.
func TestPassthroughChargesTokens(t *testing.T) {
	usage := &fakeupstream.Usage{PromptTokens: 20, CompletionTokens: 10}
	gw, fake := boundedPassthrough(t,
		fakeupstream.Reply{Text: "one", Usage: usage},
		fakeupstream.Reply{StreamChunks: []string{"two"}, Usage: usage},
		fakeupstream.Reply{Text: "three", Usage: usage},
		fakeupstream.Reply{Text: "four"},
	)
	header := map[string]string{"Authorization": "Bearer key-acme", "X-Session-Id": "mine"}
	remaining := func(r *gwtest.Response) string { return r.Header.Get("X-Ratelimit-Remaining-Tokens") }
	if r := gw.Chat(gwtest.User("fake/plain", "one"), header); r.Status != http.StatusOK || remaining(r) != "100" {
		t.Fatalf("first: %d %s, %q tokens left", r.Status, r.Body, remaining(r))
	}
	streamed := gwtest.User("fake/plain", "two")
	streamed["stream"] = true
	streamed["stream_options"] = map[string]any{"include_usage": true}
	if r := gw.Chat(streamed, header); r.Status != http.StatusOK || remaining(r) != "70" {
		t.Fatalf("second: %d, %q tokens left, want 70", r.Status, remaining(r))
	}
	// Function messages and custom tools, which no graph takes, are the
	// provider's to judge.
	odd := map[string]any{"model": "fake/plain", "messages": []any{
		map[string]any{"role": "user", "content": "three"},
		map[string]any{"role": "function", "name": "f", "content": "r"},
	}, "tools": []any{map[string]any{"type": "custom", "custom": map[string]any{"name": "grammar"}}}}
	if r := gw.Chat(odd, header); r.Status != http.StatusOK || remaining(r) != "40" {
		t.Fatalf("third: %d %s, %q tokens left, want 40", r.Status, r.Body, remaining(r))
	}
	if r := gw.Chat(gwtest.User("fake/plain", "four"), header); r.Status != http.StatusOK || remaining(r) != "10" {
		t.Fatalf("fourth: %d %s, %q tokens left, want 10", r.Status, r.Body, remaining(r))
	}
	reqs := fake.Requests()
	if len(reqs) != 4 || !strings.Contains(string(reqs[2].Body), `"custom"`) {
		t.Fatalf("%d requests upstream; third %s", len(reqs), reqs[min(2, len(reqs)-1)].Body)
	}
	for _, r := range reqs {
		if r.Header.Get("X-Session-Id") != "" {
			t.Errorf("the session header reached the provider")
		}
	}
}
