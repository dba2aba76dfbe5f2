package runtime

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-ai/switchboard/graphs"
)

func TestApplyFilters(t *testing.T) {
	oldNote := Message{Role: RoleSystem, Content: "[routing note - not from the user] handoff a -> triage", Handoff: &Marker{From: "a", To: "triage"}}
	transcript := []Message{
		{Role: RoleUser, Content: "I was charged twice"},
		{Role: RoleAssistant, Content: "Let me look", ToolCalls: []ToolCall{call("c1", "lookup")}},
		{Role: RoleTool, ToolCallID: "c1", Content: `{"charges": 2}`},
		oldNote,
		{Role: RoleUser, Content: "refund order 42"},
		{Role: RoleAssistant, ToolCalls: []ToolCall{call("c2", "escalate_refund")}},
		{Role: RoleTool, ToolCallID: "c2", Content: `{"assistant": "refunds"}`},
	}
	tests := []struct {
		name    string
		filters []graphs.Filter
		want    []Message
		wantErr error
	}{
		{name: "all keeps everything", filters: []graphs.Filter{{Kind: graphs.FilterAll}}, want: transcript},
		{
			name:    "remove_tool_calls keeps text and notes",
			filters: []graphs.Filter{{Kind: graphs.FilterRemoveToolCalls}},
			want: []Message{
				{Role: RoleUser, Content: "I was charged twice"},
				{Role: RoleAssistant, Content: "Let me look"},
				oldNote,
				{Role: RoleUser, Content: "refund order 42"},
			},
		},
		{
			name:    "last_user_message",
			filters: []graphs.Filter{{Kind: graphs.FilterLastUserMessage}},
			want:    []Message{{Role: RoleUser, Content: "refund order 42"}},
		},
		{
			name:    "keep_last drops a result whose call was cut off",
			filters: []graphs.Filter{{Kind: graphs.FilterKeepLast, N: 5}},
			want:    transcript[3:],
		},
		{
			name:    "a filter that keeps nothing is a graph error",
			filters: []graphs.Filter{{Kind: graphs.FilterKeepLast, N: 5}, {Kind: graphs.FilterKeepLast, N: 1}},
			want:    nil,
			wantErr: ErrGraph,
		},
		{
			name:    "a list applies in order",
			filters: []graphs.Filter{{Kind: graphs.FilterRemoveToolCalls}, {Kind: graphs.FilterKeepLast, N: 2}},
			want:    []Message{oldNote, {Role: RoleUser, Content: "refund order 42"}},
		},
		{
			name:    "a long chain ends at the last user message",
			filters: []graphs.Filter{{Kind: graphs.FilterRemoveToolCalls}, {Kind: graphs.FilterKeepLast, N: 1}, {Kind: graphs.FilterLastUserMessage}, {Kind: graphs.FilterRemoveToolCalls}},
			want:    []Message{{Role: RoleUser, Content: "refund order 42"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := applyFilters(transcript, tt.filters)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestNestHistory(t *testing.T) {
	got := nestHistory([]Message{
		{Role: RoleUser, Content: "hi"},
		{Role: RoleAssistant, ToolCalls: []ToolCall{call("c1", "transfer_to_billing")}},
		{Role: RoleTool, ToolCallID: "c1", Content: `{"assistant": "billing"}`},
	})
	if len(got) != 1 || got[0].Role != RoleAssistant {
		t.Fatalf("want one assistant message, got %+v", got)
	}
	for _, want := range []string{"<CONVERSATION HISTORY>", "1. user: hi", "transfer_to_billing", `{"assistant": "billing"}`, "</CONVERSATION HISTORY>"} {
		if !strings.Contains(got[0].Content, want) {
			t.Errorf("history block lacks %q:\n%s", want, got[0].Content)
		}
	}
}
