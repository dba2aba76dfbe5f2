package gateway_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
	"github.com/switchboard-ai/switchboard/internal/gwtest"
)

// /readyz needs no key, so a store that does not answer is a 503 that
// tells nothing of the store: not its address, not its error.
func TestReadyzHidesTheStore(t *testing.T) {
	fake := fakeupstream.New(t)
	yaml := strings.Replace(deskYAML, "providers:\n", "store: {url: \"redis://sb:s3cret@127.0.0.1:1/0\", timeout: 200ms}\nproviders:\n", 1)
	gw := gwtest.Start(t, yaml, map[string]string{"FAKE_URL": fake.URL, "TOOLS_URL": "http://127.0.0.1:1"})
	r := gw.Do(context.Background(), http.MethodGet, "/readyz", nil, nil)
	if r.Status != http.StatusServiceUnavailable {
		t.Fatalf("/readyz with the store down: %d %s", r.Status, r.Body)
	}
	for _, secret := range []string{"127.0.0.1", ":1", "s3cret", "sb:", "dial", "refused"} {
		if bytes.Contains(r.Body, []byte(secret)) {
			t.Errorf("/readyz says %q: %s", secret, r.Body)
		}
	}
	if got := r.JSON(t)["status"]; got != "store unavailable" {
		t.Errorf("/readyz status %v", got)
	}
}

// A tool result over 1 MiB is not cut short and passed off as the result:
// the model reads tool_failed, "result too large".
func TestToolResultTooLarge(t *testing.T) {
	big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, `{"charges":"`+strings.Repeat("9", 1<<20)+`"}`)
	}))
	defer big.Close()
	fake := fakeupstream.New(t,
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "transfer_to_billing", `{}`)}},
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c2", "lookup_charges", `{}`)}},
		fakeupstream.Reply{Text: "too much data"},
	)
	gw := gwtest.Start(t, deskYAML, map[string]string{"FAKE_URL": fake.URL, "TOOLS_URL": big.URL})
	c := completion(t, gw, gwtest.User("support", "bill"), nil)
	if c.Text() != "too much data" {
		t.Fatalf("text %q", c.Text())
	}
	res := toolResults(fake.Requests()[2])["c2"]
	if !strings.HasPrefix(res, `{"error"`) {
		t.Fatalf("result %.200s... (%d bytes): want tool_failed", res, len(res))
	}
	if got := errorCode(t, res); got != "tool_failed" || !strings.Contains(res, "result too large") {
		t.Errorf("result %.200s: want tool_failed saying result too large", res)
	}
}

// Passthrough goes through the provider's own transport, and its timeout
// holds for a proxied call as for any other (http.DefaultTransport would
// wait for ever): 504 upstream_timeout, as the provider timed out (CONTRACT
// §3).
func TestPassthroughUsesProviderTransport(t *testing.T) {
	fake := fakeupstream.New(t, fakeupstream.Reply{Hang: true})
	yaml := strings.Replace(deskYAML, "  listen: 127.0.0.1:0\n", "  listen: 127.0.0.1:0\n  passthrough: true\n", 1)
	yaml = strings.Replace(yaml, "    timeout: 5s\n", "    timeout: 300ms\n", 1)
	gw := gwtest.Start(t, yaml, map[string]string{"FAKE_URL": fake.URL, "TOOLS_URL": "http://127.0.0.1:1"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r := gw.Do(ctx, http.MethodPost, "/v1/chat/completions", gwtest.User("fake/gpt-plain", "hi"), nil)
	if r.Status != http.StatusGatewayTimeout || r.ErrorCode(t) != "upstream_timeout" {
		t.Errorf("a provider that does not answer within its timeout: %d %s, want 504 upstream_timeout", r.Status, r.Body)
	}
}
