package runtime

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func call(id, name string) ToolCall {
	return ToolCall{ID: id, Type: "function", Function: FunctionCall{Name: name, Arguments: "{}"}}
}

func TestProviderMessages(t *testing.T) {
	note := Message{Role: RoleSystem, Content: "[routing note - not from the user] handoff triage -> billing", Handoff: &Marker{From: "triage", To: "billing"}}
	tests := []struct {
		name         string
		instructions string
		in           []Message
		want         []Message
	}{
		{
			name:         "system messages fold into the leading prompt in order",
			instructions: "You are billing.",
			in: []Message{
				{Role: RoleSystem, Content: "client context"},
				{Role: RoleUser, Content: "hi"},
				note,
				{Role: RoleDeveloper, Content: "be brief"},
			},
			want: []Message{
				{Role: RoleSystem, Content: "You are billing.\n\nclient context\n\n" + note.Content + "\n\nbe brief"},
				{Role: RoleUser, Content: "hi"},
			},
		},
		{
			name:         "a tool result without its call is dropped",
			instructions: "I",
			in:           []Message{{Role: RoleTool, ToolCallID: "x", Content: "{}"}, {Role: RoleUser, Content: "hi"}},
			want:         []Message{{Role: RoleSystem, Content: "I"}, {Role: RoleUser, Content: "hi"}},
		},
		{
			name:         "a call without its result is dropped, and an empty assistant with it",
			instructions: "I",
			in: []Message{
				{Role: RoleUser, Content: "hi"},
				{Role: RoleAssistant, ToolCalls: []ToolCall{call("a", "f"), call("b", "g")}},
				{Role: RoleTool, ToolCallID: "a", Content: "1"},
				{Role: RoleUser, Content: "again"},
				{Role: RoleAssistant, ToolCalls: []ToolCall{call("c", "f")}},
				{Role: RoleUser, Content: "more"},
			},
			want: []Message{
				{Role: RoleSystem, Content: "I"},
				{Role: RoleUser, Content: "hi"},
				{Role: RoleAssistant, ToolCalls: []ToolCall{call("a", "f")}},
				{Role: RoleTool, ToolCallID: "a", Content: "1"},
				{Role: RoleUser, Content: "again"},
				{Role: RoleUser, Content: "more"},
			},
		},
		{
			name:         "a last call without its result is dropped with its empty assistant",
			instructions: "I",
			in: []Message{
				{Role: RoleUser, Content: "hi"},
				{Role: RoleAssistant, ToolCalls: []ToolCall{call("c", "f")}},
			},
			want: []Message{{Role: RoleSystem, Content: "I"}, {Role: RoleUser, Content: "hi"}},
		},
		{
			name:         "a routing note between a call and its result does not break the pair",
			instructions: "I",
			in: []Message{
				{Role: RoleAssistant, ToolCalls: []ToolCall{call("a", "transfer_to_billing")}},
				{Role: RoleTool, ToolCallID: "a", Content: `{"assistant": "billing"}`},
				note,
			},
			want: []Message{
				{Role: RoleSystem, Content: "I\n\n" + note.Content},
				{Role: RoleAssistant, ToolCalls: []ToolCall{call("a", "transfer_to_billing")}},
				{Role: RoleTool, ToolCallID: "a", Content: `{"assistant": "billing"}`},
			},
		},
		{
			name: "no instructions and no system messages: no system message",
			in:   []Message{{Role: RoleUser, Content: "hi"}},
			want: []Message{{Role: RoleUser, Content: "hi"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A session's run reads the stored history and its own
			// messages in place: wherever the two meet, the call is the same.
			for k := 0; k <= len(tt.in); k++ {
				got := providerMessages(new([]Message), tt.instructions, tt.in[:k:k], tt.in[k:])
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("history of %d: providerMessages (-want +got):\n%s", k, diff)
				}
			}
			got := providerMessages(new([]Message), tt.instructions, nil, tt.in)
			for i, m := range got {
				if i > 0 && m.Role == RoleSystem {
					t.Errorf("system message at position %d", i)
				}
			}
		})
	}
	// A run reuses one buffer for call after call: each call must see only
	// its own messages, and nothing may be left past the buffer's length
	// (a pooled buffer must not keep a transcript alive).
	t.Run("one buffer reused", func(t *testing.T) {
		var buf []Message
		for range 2 {
			for _, tt := range tests {
				got := providerMessages(&buf, tt.instructions, nil, tt.in)
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("%s: providerMessages (-want +got):\n%s", tt.name, diff)
				}
				for i, m := range buf[len(buf):cap(buf)] {
					if !cmp.Equal(m, Message{}) {
						t.Errorf("%s: buffer holds %+v at %d, past its length %d", tt.name, m, len(buf)+i, len(buf))
					}
				}
				clear(buf) // as recycle does
			}
		}
	})
}
