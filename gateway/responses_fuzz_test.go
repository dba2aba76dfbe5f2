package gateway

import (
	"encoding/json"
	"testing"

	"github.com/switchboard-ai/switchboard/runtime"
)

// Any body decodes to a 400 or to messages a run can take: a known role,
// a tool message with the call it answers, an assistant call with an id
// and a name; and a response rendered for it is valid JSON.
func FuzzDecodeResponsesRequest(f *testing.F) {
	for _, seed := range []string{
		`{"model":"m","input":"hi"}`,
		`{"model":"m","input":"hi","instructions":"be brief","metadata":{"a":1},"tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"function","name":"f"}}`,
		`{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_image","image_url":"data:x"}]},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"r"}]}]}`,
		`{"model":"m","input":[{"type":"message","role":"assistant","content":[{"type":"refusal","refusal":"no"}]}],"text":{"format":{"type":"json_schema","name":"s","schema":{}}}}`,
		`{"model":"m","input":[{"type":"reasoning"}]}`,
		`{"model":"m","input":null}`,
		`[`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, e := decodeResponsesRequest(body)
		if e != nil {
			if e.Status != 400 || e.Code != codeInvalidRequest || e.Message == "" {
				t.Fatalf("error %+v", e)
			}
			return
		}
		if len(req.messages) == 0 || req.Model == "" {
			t.Fatalf("accepted a request with no input or model: %s", body)
		}
		for i, m := range req.messages {
			switch m.Role {
			case runtime.RoleUser, runtime.RoleSystem, runtime.RoleDeveloper:
				if len(m.ToolCalls) > 0 || m.ToolCallID != "" || m.Handoff != nil {
					t.Fatalf("message %d: %+v", i, m)
				}
			case runtime.RoleAssistant:
				for _, c := range m.ToolCalls {
					if c.ID == "" || c.Function.Name == "" || c.Type != "function" {
						t.Fatalf("message %d: call %+v", i, c)
					}
				}
			case runtime.RoleTool:
				if m.ToolCallID == "" {
					t.Fatalf("message %d: a tool result without its call id", i)
				}
			default:
				t.Fatalf("message %d: role %q", i, m.Role)
			}
			if len(m.Parts) > 0 && !json.Valid(m.Parts) {
				t.Fatalf("message %d: parts %q", i, m.Parts)
			}
		}
		_ = req.params()
		_ = req.toolChoice()
		r := newResponseRender(newResponse("resp_0", req.Model, req), req.includes(includeHandoffs), nil)
		r.finish(&runtime.Result{Agent: "a", Message: runtime.Message{Role: "assistant", Content: "x"}, FinishReason: "stop"}, nil)
		if _, err := json.Marshal(r.resp); err != nil {
			t.Fatalf("render: %v", err)
		}
	})
}
