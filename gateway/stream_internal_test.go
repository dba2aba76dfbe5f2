package gateway

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/internal/jsonenc"
	"github.com/switchboard-ai/switchboard/runtime"
)

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
	Index        int       `json:"index"`
	Delta        refDelta  `json:"delta"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
}

type refDelta struct {
	Role      string           `json:"role,omitempty"`
	Content   *string          `json:"content,omitempty"`
	ToolCalls []streamToolCall `json:"tool_calls,omitempty"`
}

func TestAppendChunkMatchesEncodingJSON(t *testing.T) {
	text, empty, stop := "Hello <b>&</b> \u2028 \xff", "", "stop"
	tests := []struct {
		name   string
		delta  chunkDelta
		calls  []streamToolCall
		finish *string
		meta   chunkMetadata
		usage  *runtime.Usage
	}{
		{name: "first delta", delta: chunkDelta{Role: "assistant", Content: &text}, meta: chunkMetadata{AgentName: "triage"}},
		{name: "next delta", delta: chunkDelta{Content: &text}, meta: chunkMetadata{AgentName: "a\"b"}},
		{name: "empty content is sent", delta: chunkDelta{Content: &empty}, meta: chunkMetadata{AgentName: "triage"}},
		{name: "role alone", delta: chunkDelta{Role: "assistant"}, meta: chunkMetadata{AgentName: "x"}},
		{name: "handoff", meta: chunkMetadata{AgentName: "billing", Event: "handoff", From: "triage", To: "billing", ToolCallID: "call_1"}},
		{name: "tool calls", delta: chunkDelta{Role: "assistant"}, calls: []streamToolCall{
			{Index: 0, ToolCall: runtime.ToolCall{ID: "call_1", Type: "function", Function: runtime.FunctionCall{Name: "f", Arguments: `{"q":"<x>"}`}}},
			{Index: 1, ToolCall: runtime.ToolCall{ID: "call_2", Type: "function", Function: runtime.FunctionCall{Name: "g", Arguments: "{}"}}},
		}, meta: chunkMetadata{AgentName: "billing", SessionID: "s-1"}},
		{name: "content and tool calls", delta: chunkDelta{Content: &text}, calls: []streamToolCall{{ToolCall: runtime.ToolCall{ID: "c", Type: "function"}}},
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
				ref.Choices = []refChoice{{Delta: refDelta{Role: tt.delta.Role, Content: tt.delta.Content, ToolCalls: tt.calls}, FinishReason: tt.finish}}
			} else {
				ref.Choices = []refChoice{}
			}
			want, err := json.Marshal(ref)
			if err != nil {
				t.Fatal(err)
			}
			got, err := appendChunk(nil, jsonenc.AppendString(nil, id), created, model, &tt.delta, tt.calls, tt.finish, &tt.meta, tt.usage)
			if err != nil {
				t.Fatalf("appendChunk: %v", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("appendChunk mismatch (-encoding/json +got):\n%s", diff)
			}
		})
	}
}

// countingWriter is a writer a middleware could put in gin's place: it
// must keep every write of a stream.
type countingWriter struct {
	gin.ResponseWriter
	writes int
}

func (w *countingWriter) Write(b []byte) (int, error) {
	w.writes++
	return w.ResponseWriter.Write(b)
}

// Unwrap is for http.ResponseController, as a middleware's writer has it.
func (w *countingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// TestStreamGuardGoesAroundOnlyGinsWriter: once the headers are sent, a
// stream writes to net/http's writer under gin's (which only counts), and
// keeps a writer a middleware put in gin's place.
func TestStreamGuardGoesAroundOnlyGinsWriter(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	s := &Server{cfg: &graphs.Set{}}

	rec := httptest.NewRecorder()
	c, _ := gin.CreateTestContext(rec)
	c.Request = httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	g := s.guardStream(c)
	g.write([]byte("data: 1\n\n"))
	if g.w != http.ResponseWriter(rec) {
		t.Errorf("after the headers, writes go to %T, want net/http's writer under gin's", g.w)
	}
	g.write([]byte("data: 2\n\n"))
	if got := rec.Body.String(); got != "data: 1\n\ndata: 2\n\n" || c.Writer.Status() != http.StatusOK {
		t.Errorf("wrote %q with status %d", got, c.Writer.Status())
	}

	c, _ = gin.CreateTestContext(httptest.NewRecorder())
	c.Request = httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	mw := &countingWriter{ResponseWriter: c.Writer}
	c.Writer = mw
	g = s.guardStream(c)
	g.write([]byte("data: 1\n\n"))
	g.hold([]byte("data: 2\n\n"))
	g.write([]byte("data: 3\n\n"))
	if mw.writes != 3 {
		t.Errorf("the middleware's writer saw %d writes, want 3", mw.writes)
	}
}
