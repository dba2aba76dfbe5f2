package providers

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
	"github.com/switchboard-ai/switchboard/runtime"
)

// rawMessages decodes the messages of a recorded body as raw JSON objects,
// to see exactly which keys were sent.
func rawMessages(t *testing.T, body []byte) []map[string]json.RawMessage {
	t.Helper()
	var top struct {
		Messages []map[string]json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(body, &top); err != nil {
		t.Fatal(err)
	}
	return top.Messages
}

func TestRequestConversionFull(t *testing.T) {
	s := fakeupstream.New(t, fakeupstream.Reply{Text: "ok"})
	s.SetStrict(true) // a strict server accepts what the Registry sends
	r := newTestRegistry(t, s, fastOptions(), func(p *graphs.Provider) {
		p.Headers = map[string]string{"X-Title": "switchboard", "HTTP-Referer": "https://example.com"}
	})
	req := &runtime.ChatRequest{
		Model: graphs.ModelRef{Provider: "fake", Model: "gpt-4o-mini"},
		Messages: runtime.Prompt{{
			{Role: runtime.RoleSystem, Content: "You are the billing desk."},
			{Role: runtime.RoleUser, Content: "refund please", Name: "ann"},
			{Role: runtime.RoleAssistant, ToolCalls: []runtime.ToolCall{
				{ID: "call_1", Type: "function", Function: runtime.FunctionCall{Name: "lookup", Arguments: `{"q":"x"}`}},
				{ID: "call_2", Type: "function", Function: runtime.FunctionCall{Name: "noargs"}},
			}},
			{Role: runtime.RoleTool, ToolCallID: "call_1", Content: `{"charges":[]}`},
			{Role: runtime.RoleTool, ToolCallID: "call_2", Content: ""},
		}},
		Tools: []runtime.ToolDef{
			{Name: "lookup", Description: "Looks things up", Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)},
			{Name: "noargs"},
		},
		Params: &runtime.Params{
			Temperature:         ptr[float64](0),
			TopP:                ptr[float64](0.5),
			MaxTokens:           ptr(runtime.IntParam(100)),
			MaxCompletionTokens: ptr(runtime.IntParam(200)),
			Stop:                []string{"END"},
			Seed:                ptr(runtime.IntParam(7)),
			PresencePenalty:     ptr[float64](0.25),
			FrequencyPenalty:    ptr[float64](0.5),
			User:                "u-1",
			ParallelToolCalls:   ptr(false),
			ResponseFormat:      json.RawMessage(`{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object","title":"T"}}}`),
		},
	}
	if _, err := r.Chat(t.Context(), req, nil); err != nil {
		t.Fatal(err)
	}
	got := s.Requests()[0]

	want := fakeupstream.ChatRequest{
		Model: "gpt-4o-mini",
		Messages: []fakeupstream.Message{
			{Role: "system", Content: "You are the billing desk."},
			{Role: "user", Content: "refund please", Name: "ann"},
			{Role: "assistant", ToolCalls: []fakeupstream.ToolCall{
				{ID: "call_1", Name: "lookup", Arguments: `{"q":"x"}`},
				{ID: "call_2", Name: "noargs", Arguments: `{}`},
			}},
			{Role: "tool", ToolCallID: "call_1", Content: `{"charges":[]}`},
			{Role: "tool", ToolCallID: "call_2", Content: ""},
		},
		Tools: []fakeupstream.Tool{
			{Type: "function", Function: fakeupstream.Function{Name: "lookup", Description: "Looks things up",
				Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)}},
			{Type: "function", Function: fakeupstream.Function{Name: "noargs",
				Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}},
		},
		Temperature:         ptr(0.0),
		TopP:                ptr(0.5),
		MaxTokens:           ptr(100),
		MaxCompletionTokens: ptr(200),
		Stop:                json.RawMessage(`["END"]`),
		Seed:                ptr(7),
		PresencePenalty:     ptr(0.25),
		FrequencyPenalty:    ptr(0.5),
		User:                "u-1",
		ParallelToolCalls:   ptr(false),
		ResponseFormat:      json.RawMessage(`{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object","title":"T"}}}`),
	}
	if diff := cmp.Diff(want, got.Parsed); diff != "" {
		t.Errorf("request sent (-want +got):\n%s", diff)
	}

	// Exact keys: the assistant message that only calls tools carries no
	// content (strict servers accept that); every other message has one.
	msgs := rawMessages(t, got.Body)
	if c, ok := msgs[2]["content"]; ok && string(c) != "null" {
		t.Errorf("tool-calling assistant message has content %s", c)
	}
	for _, i := range []int{0, 1, 3, 4} {
		if _, ok := msgs[i]["content"]; !ok {
			t.Errorf("message %d (%s) has no content key", i, msgs[i]["role"])
		}
	}
	if strings.Contains(string(got.Body), `"stream_options"`) {
		t.Error("a non-streamed call sent stream_options")
	}

	for k, v := range map[string]string{
		"Authorization": "Bearer sk-test", "X-Title": "switchboard", "HTTP-Referer": "https://example.com",
	} {
		if h := got.Header.Get(k); h != v {
			t.Errorf("header %s = %q, want %q", k, h, v)
		}
	}
}

func TestRequestConversionCases(t *testing.T) {
	tests := []struct {
		name  string
		req   func(*runtime.ChatRequest)
		edit  func(*graphs.Provider)
		check func(t *testing.T, r fakeupstream.Request)
	}{
		{
			name: "stream asks for usage",
			req:  func(r *runtime.ChatRequest) { r.Stream = true },
			check: func(t *testing.T, r fakeupstream.Request) {
				if !r.Parsed.Stream || r.Parsed.StreamOptions == nil || !r.Parsed.StreamOptions.IncludeUsage {
					t.Errorf("stream %v options %+v, want stream with include_usage", r.Parsed.Stream, r.Parsed.StreamOptions)
				}
			},
		},
		{
			name: "parallel_tool_calls only with tools",
			req:  func(r *runtime.ChatRequest) { r.Params = &runtime.Params{ParallelToolCalls: ptr(true)} },
			check: func(t *testing.T, r fakeupstream.Request) {
				if strings.Contains(string(r.Body), "parallel_tool_calls") || strings.Contains(string(r.Body), `"tools"`) {
					t.Errorf("body %s", r.Body)
				}
			},
		},
		{
			name: "nil params send no sampling fields",
			check: func(t *testing.T, r fakeupstream.Request) {
				for _, k := range []string{"temperature", "top_p", "max_tokens", "seed", "stop", "response_format", "user"} {
					if strings.Contains(string(r.Body), `"`+k+`":`) {
						t.Errorf("body has %s: %s", k, r.Body)
					}
				}
			},
		},
		{
			name: "content parts are sent verbatim",
			req: func(r *runtime.ChatRequest) {
				r.Messages[0][1] = runtime.Message{Role: runtime.RoleUser, Content: "look",
					Parts: json.RawMessage(`[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"data:x","detail":"low"}},{"type":"input_audio","input_audio":{"data":"AA==","format":"wav"}}]`)}
			},
			check: func(t *testing.T, r fakeupstream.Request) {
				got := string(rawMessages(t, r.Body)[1]["content"])
				want := `[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"data:x","detail":"low"}},{"type":"input_audio","input_audio":{"data":"AA==","format":"wav"}}]`
				if got != want {
					t.Errorf("content\n got %s\nwant %s", got, want)
				}
			},
		},
		{
			name: "empty user content is sent as an empty string",
			req:  func(r *runtime.ChatRequest) { r.Messages[0][1].Content = "" },
			check: func(t *testing.T, r fakeupstream.Request) {
				if got := string(rawMessages(t, r.Body)[1]["content"]); got != `""` {
					t.Errorf("content = %s, want \"\"", got)
				}
			},
		},
		{
			name: "no api key, no Authorization",
			edit: func(p *graphs.Provider) { p.APIKey = "" },
			check: func(t *testing.T, r fakeupstream.Request) {
				if h := r.Header.Get("Authorization"); h != "" {
					t.Errorf("Authorization = %q", h)
				}
			},
		},
		{
			name: "header from config overrides",
			edit: func(p *graphs.Provider) { p.Headers = map[string]string{"Authorization": "Token abc"} },
			check: func(t *testing.T, r fakeupstream.Request) {
				if h := r.Header.Get("Authorization"); h != "Token abc" {
					t.Errorf("Authorization = %q", h)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := fakeupstream.New(t, fakeupstream.Reply{Text: "ok"})
			s.SetStrict(true)
			r := newTestRegistry(t, s, fastOptions(), tc.edit)
			req := userRequest("hi", false)
			if tc.req != nil {
				tc.req(req)
			}
			if _, err := r.Chat(t.Context(), req, nil); err != nil {
				t.Fatal(err)
			}
			tc.check(t, s.Requests()[0])
		})
	}
}

func TestResponseConversion(t *testing.T) {
	calls := []fakeupstream.ToolCall{
		{ID: "call_a", Name: "lookup", Arguments: `{"q":"abc"}`},
		{ID: "call_b", Name: "transfer_to_billing", Arguments: `{"reason":"double charge"}`},
	}
	wantCalls := []runtime.ToolCall{
		{ID: "call_a", Type: "function", Function: runtime.FunctionCall{Name: "lookup", Arguments: `{"q":"abc"}`}},
		{ID: "call_b", Type: "function", Function: runtime.FunctionCall{Name: "transfer_to_billing", Arguments: `{"reason":"double charge"}`}},
	}
	usage := &fakeupstream.Usage{PromptTokens: 12, CompletionTokens: 34}
	tests := []struct {
		name       string
		reply      fakeupstream.Reply
		stream     bool
		want       runtime.ChatResponse
		wantDeltas []string
	}{
		{
			name:  "text",
			reply: fakeupstream.Reply{Text: "Hello there", Usage: usage},
			want: runtime.ChatResponse{ID: "chatcmpl-fake-1", FinishReason: "stop",
				Message: runtime.Message{Role: "assistant", Content: "Hello there"},
				Usage:   runtime.Usage{PromptTokens: 12, CompletionTokens: 34, TotalTokens: 46}},
		},
		{
			name:  "tool calls",
			reply: fakeupstream.Reply{ToolCalls: calls},
			want: runtime.ChatResponse{ID: "chatcmpl-fake-1", FinishReason: "tool_calls",
				Message: runtime.Message{Role: "assistant", ToolCalls: wantCalls},
				Usage:   runtime.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}},
		},
		{
			name:   "streamed text",
			reply:  fakeupstream.Reply{StreamChunks: []string{"Hel", "lo ", "there"}, FinishReason: "length", Usage: usage},
			stream: true,
			want: runtime.ChatResponse{ID: "chatcmpl-fake-1", FinishReason: "length",
				Message: runtime.Message{Role: "assistant", Content: "Hello there"},
				Usage:   runtime.Usage{PromptTokens: 12, CompletionTokens: 34, TotalTokens: 46}},
			wantDeltas: []string{"Hel", "lo ", "there"},
		},
		{
			name:   "streamed text and tool calls",
			reply:  fakeupstream.Reply{Text: "Let me check.", ToolCalls: calls},
			stream: true,
			want: runtime.ChatResponse{ID: "chatcmpl-fake-1", FinishReason: "tool_calls",
				Message: runtime.Message{Role: "assistant", Content: "Let me check.", ToolCalls: wantCalls},
				Usage:   runtime.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}},
			wantDeltas: []string{"Let m", "e che", "ck."},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := fakeupstream.New(t, tc.reply)
			r := newTestRegistry(t, s, fastOptions(), nil)
			var d deltas
			resp, err := r.Chat(t.Context(), userRequest("hi", tc.stream), d.add)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(&tc.want, resp); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantDeltas, d.got); diff != "" {
				t.Errorf("deltas (-want +got):\n%s", diff)
			}
		})
	}
}
