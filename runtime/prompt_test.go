package runtime

import (
	"slices"
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
			name:         "an assistant that also wrote text keeps it and its answered calls",
			instructions: "I.",
			in: []Message{
				{Role: RoleUser, Content: "a"},
				{Role: RoleAssistant, Content: "let me check", ToolCalls: []ToolCall{call("c1", "lookup"), call("c2", "lookup")}},
				{Role: RoleTool, ToolCallID: "c1", Content: "r1"},
				{Role: RoleUser, Content: "b"},
				{Role: RoleAssistant, ToolCalls: []ToolCall{call("c3", "lookup")}},
				{Role: RoleTool, ToolCallID: "c3", Content: "r3"},
				{Role: RoleAssistant, Content: "done"},
			},
			want: []Message{
				{Role: RoleSystem, Content: "I."},
				{Role: RoleUser, Content: "a"},
				{Role: RoleAssistant, Content: "let me check", ToolCalls: []ToolCall{call("c1", "lookup")}},
				{Role: RoleTool, ToolCallID: "c1", Content: "r1"},
				{Role: RoleUser, Content: "b"},
				{Role: RoleAssistant, ToolCalls: []ToolCall{call("c3", "lookup")}},
				{Role: RoleTool, ToolCallID: "c3", Content: "r3"},
				{Role: RoleAssistant, Content: "done"},
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
				got := providerMessages(tt.instructions, tt.in[:k:k], tt.in[k:]).Flat()
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("history of %d: providerMessages (-want +got):\n%s", k, diff)
				}
				for i, m := range got {
					if i > 0 && m.Role == RoleSystem {
						t.Errorf("history of %d: system message at position %d", k, i)
					}
				}
			}
			// Turn after turn a session's history grows in the same
			// memory, and the cache reads only what is new; a history in
			// other memory, or shorter than what was read, is read whole.
			var c promptCache
			key := SessionKey{ID: "s"}
			arr := slices.Clone(tt.in)
			for pass := range 2 {
				for k := 0; k <= len(arr); k++ {
					got := buildCached(&c, key, tt.instructions, arr[:k:k], arr[k:]).Flat()
					if diff := cmp.Diff(tt.want, got); diff != "" {
						t.Errorf("pass %d, history of %d: cached build (-want +got):\n%s", pass, k, diff)
					}
					if got, want := c.history(key, arr[:k:k]).marker, lastMarker(arr[:k]); got != want {
						t.Errorf("pass %d, history of %d: marker %q, want %q", pass, k, got, want)
					}
					other := slices.Clone(arr)
					got = buildCached(&c, key, tt.instructions, other[:k:k], other[k:]).Flat()
					if diff := cmp.Diff(tt.want, got); diff != "" {
						t.Errorf("pass %d, history of %d in other memory: cached build (-want +got):\n%s", pass, k, diff)
					}
					got = buildCached(&c, key, tt.instructions, arr[:k:k], arr[k:]).Flat()
					if diff := cmp.Diff(tt.want, got); diff != "" {
						t.Errorf("pass %d, history of %d again: cached build (-want +got):\n%s", pass, k, diff)
					}
					// What a call read after the history must not have
					// changed the history's cached reading.
					want := providerMessages(tt.instructions, arr[:k:k], nil).Flat()
					got = buildCached(&c, key, tt.instructions, arr[:k:k], nil).Flat()
					if diff := cmp.Diff(want, got); diff != "" {
						t.Errorf("pass %d, history of %d alone: cached build (-want +got):\n%s", pass, k, diff)
					}
				}
			}
			if diff := cmp.Diff(tt.in, arr); diff != "" {
				t.Errorf("the transcript changed (-before +after):\n%s", diff)
			}
		})
	}
}

// TestPromptSharesHistory checks that a call's messages read a session's
// history where it is: a long session is not copied for every call.
func TestPromptSharesHistory(t *testing.T) {
	history := []Message{{Role: RoleUser, Content: "hi"}, {Role: RoleAssistant, Content: "hello"}, {Role: RoleUser, Content: "bye"}}
	added := []Message{{Role: RoleUser, Content: "again"}}
	var c promptCache
	for range 2 {
		p := buildCached(&c, SessionKey{ID: "s"}, "Be brief.", history, added)
		if len(p) != 3 || &p[1][0] != &history[0] || len(p[1]) != len(history) || &p[2][0] != &added[0] {
			t.Fatalf("prompt %v does not read history and added in place", p)
		}
	}
}

// buildCached builds a call's messages as a session's run does.
func buildCached(c *promptCache, key SessionKey, instructions string, history, added []Message) Prompt {
	s := c.history(key, history)
	return s.promptWith(instructions, history, added)
}

// lastMarker is the `to` of the last handoff marker of msgs, read from the
// end.
func lastMarker(msgs []Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Handoff != nil {
			return msgs[i].Handoff.To
		}
	}
	return ""
}

// TestPromptCacheForget checks that a forgotten session is read whole again
// and that other sessions keep their entries.
func TestPromptCacheForget(t *testing.T) {
	history := []Message{{Role: RoleUser, Content: "hi"}, {Role: RoleAssistant, Content: "hello"}}
	var c promptCache
	a, b := SessionKey{ID: "a"}, SessionKey{ID: "b"}
	c.history(a, history)
	c.history(b, history)
	c.forget(a)
	if _, n := c.lookup(a, history); n != 0 {
		t.Errorf("forgotten session: %d messages read from the cache, want 0", n)
	}
	if _, n := c.lookup(b, history); n != len(history) {
		t.Errorf("other session: %d messages read from the cache, want %d", n, len(history))
	}
}

// A client system or developer text the transcript holds more than once
// (an agent SDK's instructions, sent every turn) is said once, where it was
// said last; routing notes each stay, the same handoff twice too, and
// texts of another role or name are not the same text.
func TestRepeatedSystemTextsFoldOnce(t *testing.T) {
	note := Message{Role: RoleSystem, Content: "[handoff] a -> b", Handoff: &Marker{From: "a", To: "b"}}
	msgs := []Message{
		{Role: RoleSystem, Content: "Use tools."},
		{Role: RoleUser, Content: "one"},
		note,
		{Role: RoleDeveloper, Content: "Use tools."},
		{Role: RoleSystem, Content: "Use tools."},
		{Role: RoleUser, Content: "two"},
		note,
	}
	got := providerMessages("You are b.", msgs, nil).Flat()[0].Content
	want := "You are b.\n\n[handoff] a -> b\n\nUse tools.\n\nUse tools.\n\n[handoff] a -> b"
	if got != want {
		t.Errorf("system prompt\n%q\nwant\n%q", got, want)
	}
}
