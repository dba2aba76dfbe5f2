package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
	"github.com/switchboard-ai/switchboard/internal/gwtest"
)

// With passthrough on, "provider/model" that is not a graph is proxied as
// is: only the model name changes, and the provider's key replaces the
// client's.
func TestPassthrough(t *testing.T) {
	fake := fakeupstream.New(t, fakeupstream.Reply{Text: "plain model"}, fakeupstream.Reply{StreamChunks: []string{"a", "b"}})
	yaml := strings.Replace(deskYAML, "  listen: 127.0.0.1:0\n", "  listen: 127.0.0.1:0\n  passthrough: true\n", 1)
	yaml = strings.Replace(yaml, "    timeout: 5s\n", "    timeout: 5s\n    api_key: provider-secret\n", 1)
	gw := gwtest.Start(t, yaml, map[string]string{"FAKE_URL": fake.URL, "TOOLS_URL": "http://127.0.0.1:1"})

	body := gwtest.User("fake/gpt-plain", "hi")
	body["temperature"] = 0.3
	r := gw.Chat(body, map[string]string{"Authorization": "Bearer client-key"})
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), "plain model") {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	got := fake.Requests()[0]
	if got.Parsed.Model != "gpt-plain" || got.Parsed.Temperature == nil || *got.Parsed.Temperature != 0.3 {
		t.Errorf("proxied body %s", got.Body)
	}
	if a := got.Header.Get("Authorization"); a != "Bearer provider-secret" {
		t.Errorf("Authorization upstream %q", a)
	}

	body["stream"] = true
	r = gw.Chat(body, nil)
	if data := gwtest.SSE(t, r.Body); r.Status != http.StatusOK || len(data) == 0 || data[len(data)-1] != "[DONE]" {
		t.Errorf("streamed passthrough: %d %s", r.Status, r.Body)
	}

	// A model that names no provider is still unknown.
	if r := gw.Chat(gwtest.User("nobody/x", "hi"), nil); r.Status != http.StatusNotFound || r.ErrorCode(t) != "model_not_found" {
		t.Errorf("unknown provider: %d %s", r.Status, r.Body)
	}
}

// Without passthrough, "provider/model" is not a model.
func TestNoPassthroughByDefault(t *testing.T) {
	gw, fake, _ := desk(t)
	if r := gw.Chat(gwtest.User("fake/gpt-plain", "hi"), nil); r.Status != http.StatusNotFound {
		t.Errorf("%d %s", r.Status, r.Body)
	}
	if len(fake.Requests()) != 0 {
		t.Error("request reached the upstream")
	}
}
