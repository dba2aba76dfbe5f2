package gateway

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-ai/switchboard/runtime"
)

// Responses input becomes transcript messages: the internal run input is
// the same as for a chat request.
func TestDecodeResponsesInput(t *testing.T) {
	tests := []struct {
		name string
		body string
		want []runtime.Message
	}{
		{"string", `{"model":"m","input":"hello"}`,
			[]runtime.Message{{Role: "user", Content: "hello"}}},
		{"instructions first", `{"model":"m","input":"hello","instructions":"Be brief."}`,
			[]runtime.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "hello"}}},
		{"items with parts", `{"model":"m","input":[
			{"role":"developer","content":"ctx"},
			{"type":"message","role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]},
			{"type":"message","role":"assistant","id":"msg_1","status":"completed","content":[{"type":"output_text","text":"c","annotations":[]}]},
			{"role":"user","content":"d"}],"instructions":"I"}`,
			[]runtime.Message{{Role: "developer", Content: "ctx"}, {Role: "user", Content: "ab"},
				{Role: "assistant", Content: "c"}, {Role: "system", Content: "I"}, {Role: "user", Content: "d"}}},
		{"function calls and outputs", `{"model":"m","input":[
			{"role":"user","content":"weather in Oslo and Rome?"},
			{"type":"function_call","call_id":"w1","name":"get_weather","arguments":"{\"city\":\"Oslo\"}"},
			{"type":"function_call","call_id":"w2","name":"get_weather","arguments":"{\"city\":\"Rome\"}"},
			{"type":"function_call_output","call_id":"w1","output":"sunny"},
			{"type":"function_call_output","call_id":"w2","output":[{"type":"input_text","text":"rain"}]}]}`,
			[]runtime.Message{{Role: "user", Content: "weather in Oslo and Rome?"},
				{Role: "assistant", ToolCalls: []runtime.ToolCall{
					{ID: "w1", Type: "function", Function: runtime.FunctionCall{Name: "get_weather", Arguments: `{"city":"Oslo"}`}},
					{ID: "w2", Type: "function", Function: runtime.FunctionCall{Name: "get_weather", Arguments: `{"city":"Rome"}`}}}},
				{Role: "tool", ToolCallID: "w1", Content: "sunny"}, {Role: "tool", ToolCallID: "w2", Content: "rain"}}},
		{"ignored fields", `{"model":"m","input":"x","reasoning":{"effort":"low"},"truncation":"auto","user":"u","include":["reasoning.encrypted_content"],"text":{"format":{"type":"text"}},"prompt_cache_key":"k"}`,
			[]runtime.Message{{Role: "user", Content: "x"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, e := decodeResponsesRequest([]byte(tc.body))
			if e != nil {
				t.Fatalf("decode: %v", e)
			}
			if diff := cmp.Diff(tc.want, req.messages); diff != "" {
				t.Errorf("messages (-want +got):\n%s", diff)
			}
		})
	}
}

// An image from the user is kept as a chat image part.
func TestDecodeResponsesImage(t *testing.T) {
	req, e := decodeResponsesRequest([]byte(`{"model":"m","input":[{"role":"user","content":[
		{"type":"input_text","text":"what is this?"},{"type":"input_image","image_url":"https://example.test/a.png","detail":"low"}]}]}`))
	if e != nil {
		t.Fatalf("decode: %v", e)
	}
	m := req.messages[0]
	var parts []map[string]any
	if err := json.Unmarshal(m.Parts, &parts); err != nil || m.Content != "what is this?" || len(parts) != 2 ||
		parts[1]["type"] != "image_url" || parts[1]["image_url"].(map[string]any)["url"] != "https://example.test/a.png" {
		t.Errorf("message %+v parts %s", m, m.Parts)
	}
}

func TestDecodeResponsesErrors(t *testing.T) {
	tests := []struct {
		body, param, text string
	}{
		{`[]`, "", "JSON object"},
		{`{"input":"x"}`, "model", "model is required"},
		{`{"model":"m"}`, "input", "non-empty"},
		{`{"model":"m","input":[]}`, "input", "non-empty"},
		{`{"model":"m","input":42}`, "input", "string or a list"},
		{`{"model":"m","input":"x","stream":"yes"}`, "stream", "stream must be true or false"},
		{`{"model":"m","input":[{"type":"item_reference","id":"msg_1"}]}`, "input[0].type", `unsupported item type "item_reference"`},
		{`{"model":"m","input":[{"role":"user","content":"a"},{"role":"tool","content":"b"}]}`, "input[1].role", `unknown role "tool"`},
		{`{"model":"m","input":[{"role":"user"}]}`, "input[0].content", "content is required"},
		{`{"model":"m","input":[{"role":"user","content":[{"type":"input_file","file_id":"f"}]}]}`, "input[0].content[0]", `unsupported content part "input_file"`},
		{`{"model":"m","input":[{"role":"user","content":[{"type":"input_image","file_id":"f"}]}]}`, "input[0].content[0]", "needs an image_url"},
		{`{"model":"m","input":[{"type":"function_call","name":"f"}]}`, "input[0]", "needs call_id and name"},
		{`{"model":"m","input":[{"type":"function_call_output","call_id":"c"}]}`, "input[0].output", "required"},
		{`{"model":"m","input":"x","tools":[{"type":"web_search"}]}`, "tools[0]", "only function tools"},
	}
	for _, tc := range tests {
		_, e := decodeResponsesRequest([]byte(tc.body))
		if e == nil {
			t.Errorf("%s: accepted", tc.body)
			continue
		}
		if e.Status != 400 || e.Param != tc.param || !strings.Contains(e.Message, tc.text) {
			t.Errorf("%s: %d param %q %q, want param %q and %q", tc.body, e.Status, e.Param, e.Message, tc.param, tc.text)
		}
	}
}
