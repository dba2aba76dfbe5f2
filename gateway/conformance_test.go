package gateway_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
	"github.com/switchboard-ai/switchboard/internal/gwtest"
)

// oneAgentYAML is a graph named like an OpenAI model, as OpenAI's own
// generated client tests name the model they ask for.
const oneAgentYAML = `
providers:
  fake: {base_url: "${FAKE_URL}", api_key: k}
agents:
  assistant:
    description: Answers
    instructions: You answer.
    model: fake/m
graphs:
  gpt-6-astra: {lead: assistant}
`

// The request openai-go's generated TestChatCompletionNewWithOptionalParams
// sends (every optional parameter OpenAI documents, captured from
// openai-go v3.99.0) is answered 200: what the gateway cannot use is
// ignored, the sampling parameters reach the provider.
func TestEveryDocumentedParameterIsAccepted(t *testing.T) {
	fake := fakeupstream.New(t, fakeupstream.Reply{Text: "ok"})
	fake.SetStrict(true)
	gw := gwtest.Start(t, oneAgentYAML, map[string]string{"FAKE_URL": fake.URL})
	body, err := os.ReadFile("testdata/openai-go-optional-params.json")
	if err != nil {
		t.Fatal(err)
	}
	resp := gw.Chat(body, nil)
	if resp.Status != 200 {
		t.Fatalf("status %d: %s", resp.Status, resp.Body)
	}
	var c gwtest.Completion
	resp.Decode(t, &c)
	if c.Text() != "ok" || c.Model != "gpt-6-astra" {
		t.Errorf("reply %+v", c)
	}
	got := fake.Requests()[0].Parsed
	if got.Temperature == nil || *got.Temperature != 1 || got.TopP == nil || *got.TopP != 1 ||
		got.Seed == nil || *got.Seed != -9007199254740991 || string(got.Stop) != `["\n"]` || got.User != "user-1234" {
		t.Errorf("sampling parameters the provider got: %s", fake.Requests()[0].Body)
	}
	if !strings.Contains(string(fake.Requests()[0].Body), `"strict":true`) {
		t.Errorf("the client tool's strict did not reach the provider: %s", fake.Requests()[0].Body)
	}
}

// Every message shape OpenAI documents for a request is accepted: content
// parts of every type, an assistant's refusal, audio and function_call, a
// tool result as parts, names.
func TestDocumentedMessageShapesAreAccepted(t *testing.T) {
	fake := fakeupstream.New(t, fakeupstream.Reply{Text: "ok"})
	gw := gwtest.Start(t, oneAgentYAML, map[string]string{"FAKE_URL": fake.URL})
	var body map[string]any
	if err := json.Unmarshal([]byte(`{
	  "model": "gpt-6-astra",
	  "messages": [
	    {"role": "system", "content": [{"type": "text", "text": "be brief"}], "name": "ops"},
	    {"role": "user", "name": "ann", "content": [
	      {"type": "text", "text": "look"},
	      {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA", "detail": "low"}},
	      {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
	      {"type": "file", "file": {"file_id": "file-1", "filename": "a.pdf"}}
	    ]},
	    {"role": "assistant", "content": [{"type": "text", "text": "no"}, {"type": "refusal", "refusal": "cannot"}], "refusal": "cannot", "audio": {"id": "audio-1"}, "name": "bot",
	     "tool_calls": [{"id": "call-1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
	     "function_call": {"name": "f", "arguments": "{}"}},
	    {"role": "tool", "tool_call_id": "call-1", "content": [{"type": "text", "text": "42"}]},
	    {"role": "user", "content": "and now?"}
	  ],
	  "tools": [{"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object"}, "strict": false}}]
	}`), &body); err != nil {
		t.Fatal(err)
	}
	if resp := gw.Chat(body, nil); resp.Status != 200 {
		t.Fatalf("status %d: %s", resp.Status, resp.Body)
	}
}
