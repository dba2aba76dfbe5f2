package runtime

import (
	"fmt"
	"strings"
	"testing"

	"github.com/switchboard-ai/switchboard/graphs"
)

// benchTranscript is a session of turns turns, each a user question, a
// tool call with its result, and the answer.
func benchTranscript(turns int) []Message {
	var t []Message
	t = append(t, Message{Role: RoleSystem, Content: "Answer briefly."})
	for i := range turns {
		id := fmt.Sprintf("call_%d", i)
		t = append(t,
			Message{Role: RoleUser, Content: fmt.Sprintf("question %d: %s", i, strings.Repeat("lorem ipsum ", 10))},
			Message{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: id, Type: "function", Function: FunctionCall{Name: "lookup", Arguments: `{"q":"x"}`}}}},
			Message{Role: RoleTool, ToolCallID: id, Content: `{"result":"ok"}`},
			Message{Role: RoleAssistant, Content: fmt.Sprintf("answer %d: %s", i, strings.Repeat("dolor sit amet ", 10))},
		)
	}
	return t
}

// BenchmarkProviderMessages builds one provider call's messages from a
// transcript (docs/handoffs.md), for a short and a long session.
func BenchmarkProviderMessages(b *testing.B) {
	for _, turns := range []int{1, 50, 200} {
		t := benchTranscript(turns)
		b.Run(fmt.Sprintf("messages=%d", len(t)), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if out := providerMessages("You are a helpful assistant.", t, nil); len(out) == 0 {
					b.Fatal("no messages")
				}
			}
		})
	}
}

// BenchmarkApplyFilters runs each input filter over a 50-turn transcript.
func BenchmarkApplyFilters(b *testing.B) {
	t := benchTranscript(50)
	for _, f := range []graphs.Filter{
		{Kind: graphs.FilterAll},
		{Kind: graphs.FilterRemoveToolCalls},
		{Kind: graphs.FilterLastUserMessage},
		{Kind: graphs.FilterKeepLast, N: 10},
		{Kind: graphs.FilterNestHistory},
	} {
		b.Run(string(f.Kind), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := applyFilters(t, []graphs.Filter{f}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
