package runtime

import (
	"slices"
	"strings"
)

// providerMessages builds the messages of a provider call from a transcript
// (CONTRACT §4.5): one leading system message made of the agent's
// instructions followed, each after a blank line, by every system and
// developer message of the transcript in order; then the other messages in
// order, cleaned so that every tool result follows its call and every call
// has its result. Local models' chat templates reject anything else.
//
// The messages are built in the memory of *buf, grown as needed and left in
// *buf, so that a caller can reuse it: a long session's call then copies its
// history into memory it already has rather than into a fresh large slice,
// which the garbage collector would have to sweep and scavenge every turn.
//
// The transcript is history followed by added, read in place: a session's
// history is shared with its store and never copied whole but into *buf.
func providerMessages(buf *[]Message, instructions string, history, added []Message) []Message {
	out := append((*buf)[:0], Message{})
	defer func() { *buf = out }()
	var sys strings.Builder
	sys.WriteString(instructions)
	// The assistant message whose tool calls are still being answered, and
	// the ids of its calls with no result yet. A turn has few calls, so a
	// slice beats a map, and a long transcript makes no map per turn.
	open := -1
	var pending []string
	closeOpen := func() {
		if open < 0 {
			return
		}
		if len(pending) > 0 {
			out[open] = withoutCalls(out[open], pending)
			if out[open].Content == "" && len(out[open].Parts) == 0 && len(out[open].ToolCalls) == 0 {
				// Delete zeroes the element it frees, so that a reused
				// buffer keeps nothing past its length.
				out = slices.Delete(out, open, open+1)
			}
		}
		open, pending = -1, pending[:0]
	}
	for _, part := range [2][]Message{history, added} {
		for i := range part {
			m := &part[i]
			switch {
			case m.IsSystem():
				if sys.Len() > 0 {
					sys.WriteString("\n\n")
				}
				sys.WriteString(m.Content)
			case m.Role == RoleTool:
				j := -1
				if open >= 0 {
					j = slices.Index(pending, m.ToolCallID)
				}
				if j < 0 {
					continue // a result without its call: dropped
				}
				pending = slices.Delete(pending, j, j+1)
				out = append(out, *m)
			default:
				closeOpen()
				out = append(out, *m)
				if m.Role == RoleAssistant && len(m.ToolCalls) > 0 {
					open = len(out) - 1
					for _, c := range m.ToolCalls {
						if !slices.Contains(pending, c.ID) {
							pending = append(pending, c.ID)
						}
					}
				}
			}
		}
	}
	closeOpen()
	if sys.Len() == 0 {
		return out[1:]
	}
	out[0] = Message{Role: RoleSystem, Content: sys.String()}
	return out
}

// withoutCalls returns m without the tool calls whose ids are in drop.
func withoutCalls(m Message, drop []string) Message {
	kept := make([]ToolCall, 0, len(m.ToolCalls))
	for _, c := range m.ToolCalls {
		if !slices.Contains(drop, c.ID) {
			kept = append(kept, c)
		}
	}
	if len(kept) == 0 {
		kept = nil
	}
	m.ToolCalls = kept
	return m
}
