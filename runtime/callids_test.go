package runtime_test

import (
	"regexp"
	"testing"

	"github.com/switchboard-ai/switchboard/cache"
	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/runtime"
)

// TestCallsWithoutIDsGetOne checks that tool calls a model sends without an
// id or a type (some local models do) get a fresh "call_sb_" id each and the
// type "function", that the tool runs under that id, and that the stored
// assistant message and its tool results agree on it.
func TestCallsWithoutIDsGetOne(t *testing.T) {
	cfg, err := graphs.Parse([]byte(gateConfig), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	store := cache.NewMemory(cache.Options{})
	defer store.Close()
	bare := func(args string) runtime.ToolCall {
		return runtime.ToolCall{Function: runtime.FunctionCall{Name: "rewrite", Arguments: args}}
	}
	model := &scriptModel{replies: []runtime.Message{calls(bare(`{"n":1}`), bare(`{"n":2}`))}}
	tools := &argsTools{}
	r := runtime.New(runtime.Options{Model: model, Store: store, Tools: runtime.ToolKinds{graphs.ToolHTTP: tools}})
	req := &runtime.Request{Graph: cfg.Graphs["desk"], SessionID: "bare",
		Messages: []runtime.Message{{Role: runtime.RoleUser, Content: "hi"}}}
	if _, err := r.Run(t.Context(), req, nil); err != nil {
		t.Fatal(err)
	}
	sess, err := r.Session(t.Context(), runtime.SessionKey{ID: "bare"})
	if err != nil {
		t.Fatal(err)
	}
	idForm := regexp.MustCompile(`^call_sb_[0-9a-f]{24}$`)
	var made []runtime.ToolCall
	results := map[string]string{}
	for _, m := range sess.Messages {
		made = append(made, m.ToolCalls...)
		if m.Role == runtime.RoleTool {
			results[m.ToolCallID] = m.Content
		}
	}
	if len(made) != 2 || made[0].ID == made[1].ID {
		t.Fatalf("stored calls %+v, want two with distinct ids", made)
	}
	for _, c := range made {
		if !idForm.MatchString(c.ID) || c.Type != "function" {
			t.Errorf("stored call %+v, want a call_sb_ id and type function", c)
		}
		if tools.ran[c.ID] != c.Function.Arguments || results[c.ID] != "ran "+c.Function.Arguments {
			t.Errorf("call %s: ran with %q, result %q; want the tool run and its result under the new id",
				c.ID, tools.ran[c.ID], results[c.ID])
		}
	}
	// The next model call is shown the calls under the same ids as their
	// results.
	if n := len(model.calls); n != 2 {
		t.Fatalf("%d model calls, want 2", n)
	}
	shown := map[string]bool{}
	for _, run := range model.calls[1].Messages {
		for _, m := range run {
			for _, c := range m.ToolCalls {
				shown[c.ID] = true
			}
			if m.Role == runtime.RoleTool && !shown[m.ToolCallID] {
				t.Errorf("the model was shown a result for %q before a call with that id", m.ToolCallID)
			}
		}
	}
	if !shown[made[0].ID] || !shown[made[1].ID] {
		t.Errorf("the model was shown calls %v, want %s and %s", shown, made[0].ID, made[1].ID)
	}
}
