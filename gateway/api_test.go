package gateway_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
	"github.com/switchboard-ai/switchboard/internal/gwtest"
)

func TestModels(t *testing.T) {
	gw, _, _ := desk(t)
	var list struct {
		Object string `json:"object"`
		Data   []struct {
			ID      string `json:"id"`
			Object  string `json:"object"`
			OwnedBy string `json:"owned_by"`
		} `json:"data"`
	}
	gw.Do(context.Background(), http.MethodGet, "/v1/models", nil, nil).Decode(t, &list)
	if list.Object != "list" || len(list.Data) != 1 || list.Data[0].ID != "support" || list.Data[0].Object != "model" || list.Data[0].OwnedBy != "switchboard" {
		t.Errorf("models: %+v", list)
	}
	if r := gw.Do(context.Background(), http.MethodGet, "/v1/models/support", nil, nil); r.Status != http.StatusOK {
		t.Errorf("GET model: %d %s", r.Status, r.Body)
	}
	if r := gw.Do(context.Background(), http.MethodGet, "/v1/models/nope", nil, nil); r.Status != http.StatusNotFound || r.ErrorCode(t) != "model_not_found" {
		t.Errorf("GET unknown model: %d %s", r.Status, r.Body)
	}
}

// Bad input gets a clear OpenAI-shaped error and never reaches a model.
func TestBadRequests(t *testing.T) {
	gw, fake, _ := desk(t)
	tool := func(name string) map[string]any {
		return map[string]any{"type": "function", "function": map[string]any{"name": name, "parameters": map[string]any{"type": "object"}}}
	}
	tests := []struct {
		name   string
		body   any
		status int
		code   string
	}{
		{"bad JSON", `{"model": "support", "messages": [`, 400, "invalid_request"},
		{"not an object", `[]`, 400, "invalid_request"},
		{"no messages", map[string]any{"model": "support", "messages": []any{}}, 400, "invalid_request"},
		{"no model", map[string]any{"messages": []map[string]any{{"role": "user", "content": "x"}}}, 400, "invalid_request"},
		{"unknown role", map[string]any{"model": "support", "messages": []map[string]any{{"role": "wizard", "content": "x"}}}, 400, "invalid_request"},
		{"content of the wrong type", map[string]any{"model": "support", "messages": []map[string]any{{"role": "user", "content": 42}}}, 400, "invalid_request"},
		{"role of the wrong type", map[string]any{"model": "support", "messages": []map[string]any{{"role": 5, "content": "x"}}}, 400, "invalid_request"},
		{"stream of the wrong type", map[string]any{"model": "support", "stream": "yes", "messages": []map[string]any{{"role": "user", "content": "x"}}}, 400, "invalid_request"},
		{"stop of the wrong type", map[string]any{"model": "support", "stop": 3, "messages": []map[string]any{{"role": "user", "content": "x"}}}, 400, "invalid_request"},
		{"tool message without its id", map[string]any{"model": "support", "messages": []map[string]any{{"role": "tool", "content": "x"}}}, 400, "invalid_request"},
		{"malformed tool call", map[string]any{"model": "support", "messages": []map[string]any{{"role": "assistant", "tool_calls": []map[string]any{{"type": "function"}}}}}, 400, "invalid_request"},
		{"client tool named like a handoff", map[string]any{"model": "support", "messages": []map[string]any{{"role": "user", "content": "x"}}, "tools": []any{tool("transfer_to_billing")}}, 400, "invalid_request"},
		{"unknown model", gwtest.User("gpt-4o", "x"), 404, "model_not_found"},
		{"body over the limit", `{"model": "support", "messages": [{"role": "user", "content": "` + strings.Repeat("x", 5<<20) + `"}]}`, 413, "request_too_large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := gw.Chat(tt.body, nil)
			if r.Status != tt.status {
				t.Fatalf("status %d, want %d: %s", r.Status, tt.status, r.Body)
			}
			e := r.JSON(t)["error"].(map[string]any)
			if e["code"] != tt.code || e["message"] == "" || e["type"] == "" {
				t.Errorf("error body %s", r.Body)
			}
			if _, ok := e["param"]; !ok {
				t.Errorf("error body lacks param: %s", r.Body)
			}
			if msg, _ := e["message"].(string); strings.Contains(msg, "Go ") || strings.Contains(msg, "struct") {
				t.Errorf("the message speaks of Go types: %s", msg)
			}
		})
	}
	if n := len(fake.Requests()); n != 0 {
		t.Errorf("bad requests reached the upstream %d times", n)
	}
}

func TestUpstreamFailures(t *testing.T) {
	gw, _, _ := desk(t,
		fakeupstream.Reply{Status: 400, Text: "bad model"},
	)
	r := gw.Chat(gwtest.User("support", "x"), nil)
	if r.Status != http.StatusBadGateway || r.ErrorCode(t) != "upstream_error" {
		t.Errorf("provider 400: %d %s", r.Status, r.Body)
	}
}

func TestHealth(t *testing.T) {
	gw, _, _ := desk(t)
	for _, path := range []string{"/healthz", "/readyz"} {
		if r := gw.Do(context.Background(), http.MethodGet, path, nil, nil); r.Status != http.StatusOK {
			t.Errorf("%s: %d", path, r.Status)
		}
	}
	r := gw.Do(context.Background(), http.MethodGet, "/metrics", nil, nil)
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), "go_goroutines") {
		t.Errorf("/metrics: %d", r.Status)
	}
}

// TestSamplingParameters checks that the client's sampling parameters reach
// the provider, `stop` as one string included (OpenAI takes a string or an
// array).
func TestSamplingParameters(t *testing.T) {
	gw, fake, _ := desk(t, fakeupstream.Reply{Text: "ok"}, fakeupstream.Reply{Text: "ok"})
	for _, tc := range []struct {
		stop any
		want string
	}{{"END", `["END"]`}, {[]string{"END", "STOP"}, `["END","STOP"]`}} {
		body := gwtest.User("support", "hi")
		body["stop"], body["temperature"], body["max_tokens"] = tc.stop, 0, 7
		if r := gw.Chat(body, nil); r.Status != http.StatusOK {
			t.Fatalf("stop %v: status %d: %s", tc.stop, r.Status, r.Body)
		}
		reqs := fake.Requests()
		got := reqs[len(reqs)-1].Parsed
		if string(got.Stop) != tc.want || got.Temperature == nil || *got.Temperature != 0 || got.MaxTokens == nil || *got.MaxTokens != 7 {
			t.Errorf("stop %v: the provider got stop %s, temperature %v, max_tokens %v", tc.stop, got.Stop, got.Temperature, got.MaxTokens)
		}
	}
}

// A graph's name may hold a "/" (as model names do): GET /v1/models/{id}
// finds it, written plainly or escaped. A path with a slash too many is a
// 404 in the API's error shape, not a redirect.
func TestModelNameWithASlash(t *testing.T) {
	gw := gwtest.Start(t, `agents:
  a: {description: A, instructions: A., model: demo/switchboard-demo}
graphs:
  acme/support: {lead: a}
`, nil)
	for _, path := range []string{"/v1/models/acme/support", "/v1/models/acme%2Fsupport"} {
		var m struct {
			ID string `json:"id"`
		}
		r := gw.Do(context.Background(), http.MethodGet, path, nil, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
		}
		if r.Decode(t, &m); m.ID != "acme/support" {
			t.Errorf("GET %s: %s", path, r.Body)
		}
	}
	if r := gw.Do(context.Background(), http.MethodGet, "/v1/models/", nil, nil); r.Status != http.StatusNotFound || r.ErrorCode(t) != "model_not_found" {
		t.Errorf("GET /v1/models/: %d %s", r.Status, r.Body)
	}
	if r := gw.Do(context.Background(), http.MethodPost, "/v1/chat/completions/", gwtest.User("acme/support", "hi"), nil); r.Status != http.StatusNotFound || r.ErrorCode(t) != "not_found" {
		t.Errorf("POST /v1/chat/completions/: %d %s", r.Status, r.Body)
	}
}
