package gateway

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-ai/switchboard/runtime"
)

// trickyStrings are strings whose JSON encoding has a catch.
var trickyStrings = []string{
	"", "plain text", `say "hi"`, `back\slash`, "tab\tnew\nline\rcr",
	"\b\f\x00\x01\x1f\x7f", "<script>alert('x')</script> & more", "line\u2028para\u2029end",
	"Grüße 👋 日本語", "bad \xff byte", "cut \xe2\x82 rune", "\xed\xa0\x80 surrogate", "\xf4\x90\x80\x80 too big",
	"ends in \xc3", "é\u0301 combining", "\ufffd real replacement char", strings.Repeat("x<", 100),
}

func TestAppendJSONStringMatchesEncodingJSON(t *testing.T) {
	check := func(s string) {
		t.Helper()
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendJSONString([]byte("prefix"), s); string(got) != "prefix"+string(want) {
			t.Errorf("appendJSONString(%q) = %s, want %s", s, got[len("prefix"):], want)
		}
	}
	for _, s := range trickyStrings {
		check(s)
	}
	// Random strings, mostly of the bytes that matter: ASCII specials,
	// control bytes and pieces of multi-byte runes, valid or not.
	alphabet := []byte("ab\"\\<>&\n\t\x00\x1f\x7f\xc3\xa9\xe2\x80\xa8\xa9\xf0\x9f\x91\x8b\xff\xed\xa0")
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		b := make([]byte, rng.IntN(12))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		check(string(b))
	}
}

// refChunk is the chunk as encoding/json writes it, the reference
// appendChunk must match byte for byte.
type refChunk struct {
	ID       string         `json:"id"`
	Object   string         `json:"object"`
	Created  int64          `json:"created"`
	Model    string         `json:"model"`
	Choices  []refChoice    `json:"choices"`
	Usage    *runtime.Usage `json:"usage,omitempty"`
	Metadata chunkMetadata  `json:"metadata"`
}

type refChoice struct {
	Index        int        `json:"index"`
	Delta        chunkDelta `json:"delta"`
	FinishReason *string    `json:"finish_reason"`
}

func TestAppendChunkMatchesEncodingJSON(t *testing.T) {
	text, empty, stop := "Hello <b>&</b> \u2028 \xff", "", "stop"
	tests := []struct {
		name   string
		delta  chunkDelta
		finish *string
		meta   chunkMetadata
		usage  *runtime.Usage
	}{
		{name: "first delta", delta: chunkDelta{Role: "assistant", Content: &text}, meta: chunkMetadata{AgentName: "triage"}},
		{name: "next delta", delta: chunkDelta{Content: &text}, meta: chunkMetadata{AgentName: "a\"b"}},
		{name: "empty content is sent", delta: chunkDelta{Content: &empty}, meta: chunkMetadata{AgentName: "triage"}},
		{name: "role alone", delta: chunkDelta{Role: "assistant"}, meta: chunkMetadata{AgentName: "x"}},
		{name: "handoff", meta: chunkMetadata{AgentName: "billing", Event: "handoff", From: "triage", To: "billing", ToolCallID: "call_1"}},
		{name: "tool calls", delta: chunkDelta{Role: "assistant", ToolCalls: []streamToolCall{
			{Index: 0, ToolCall: runtime.ToolCall{ID: "call_1", Type: "function", Function: runtime.FunctionCall{Name: "f", Arguments: `{"q":"<x>"}`}}},
			{Index: 1, ToolCall: runtime.ToolCall{ID: "call_2", Type: "function", Function: runtime.FunctionCall{Name: "g", Arguments: "{}"}}},
		}}, meta: chunkMetadata{AgentName: "billing", SessionID: "s-1"}},
		{name: "content and tool calls", delta: chunkDelta{Content: &text, ToolCalls: []streamToolCall{{ToolCall: runtime.ToolCall{ID: "c", Type: "function"}}}},
			meta: chunkMetadata{AgentName: "a"}},
		{name: "finish", finish: &stop, meta: chunkMetadata{AgentName: "billing", SessionID: "s-1"}},
		{name: "usage", meta: chunkMetadata{AgentName: "billing", SessionID: "s-1"}, usage: &runtime.Usage{PromptTokens: 12, CompletionTokens: 3, TotalTokens: 15}},
		{name: "zero usage", meta: chunkMetadata{AgentName: ""}, usage: &runtime.Usage{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const id, created, model = "chatcmpl-<1>", int64(1700000000), "support & co"
			ref := refChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: model, Metadata: tt.meta, Usage: tt.usage}
			if tt.usage == nil {
				ref.Choices = []refChoice{{Delta: tt.delta, FinishReason: tt.finish}}
			} else {
				ref.Choices = []refChoice{}
			}
			want, err := json.Marshal(ref)
			if err != nil {
				t.Fatal(err)
			}
			got, err := appendChunk(nil, id, created, model, tt.delta, tt.finish, tt.meta, tt.usage)
			if err != nil {
				t.Fatalf("appendChunk: %v", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("appendChunk mismatch (-encoding/json +got):\n%s", diff)
			}
		})
	}
}
