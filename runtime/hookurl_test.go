package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/switchboard-ai/switchboard/cache"
	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/runtime"
)

// failingHook is a pre_tool_call hook that cannot be reached.
type failingHook struct{}

func (failingHook) PreToolCall(context.Context, *graphs.Hook, *runtime.HookCall) (runtime.HookVerdict, error) {
	return runtime.HookVerdict{}, errors.New("unreachable: connection refused")
}

// A hook's URL may carry credentials: the log line of a hook that failed
// names it with the password and secret parameters masked (CONTRACT §14).
func TestFailedHookLogsNoCredentials(t *testing.T) {
	cfg, err := graphs.Parse([]byte(`
providers: {fake: {base_url: "http://127.0.0.1:1/v1"}}
tools:
  lookup: {http: {url: "http://127.0.0.1:1/t"}}
agents:
  desk: {description: Desk., instructions: I am the desk., model: fake/m, tools: [lookup]}
graphs:
  g: {lead: desk, pre_tool_call: {url: "http://gate:hookpass@127.0.0.1:1/gate?token=tsecret"}}
`), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	store := cache.NewMemory(cache.Options{})
	defer store.Close()
	var logs bytes.Buffer
	model := &scriptModel{replies: []runtime.Message{calls(call("c1", "lookup", `{}`))}}
	r := runtime.New(runtime.Options{Model: model, Store: store, PreToolCall: failingHook{},
		Tools: runtime.ToolKinds{graphs.ToolHTTP: &argsTools{}}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	req := &runtime.Request{Graph: cfg.Graphs["g"], Messages: []runtime.Message{{Role: runtime.RoleUser, Content: "hi"}}}
	if _, err := r.Run(t.Context(), req, nil); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if !strings.Contains(out, "pre_tool_call hook failed") || !strings.Contains(out, "gate:xxxxx@127.0.0.1:1/gate") {
		t.Fatalf("no masked hook URL in the log:\n%s", out)
	}
	if strings.Contains(out, "hookpass") || strings.Contains(out, "tsecret") {
		t.Errorf("the log shows the hook's credentials:\n%s", out)
	}
}
