package runtime

import (
	"fmt"
	"strings"

	"github.com/switchboard-ai/switchboard/graphs"
)

// applyFilters runs a handoff's input filters, in order, over the transcript
// as it stands before the routing note (docs/handoffs.md). It never returns an
// empty transcript: a filter that would keep nothing is ErrGraph.
func applyFilters(transcript []Message, filters []graphs.Filter) ([]Message, error) {
	out := transcript
	for _, f := range filters {
		switch f.Kind {
		case graphs.FilterAll:
		case graphs.FilterRemoveToolCalls:
			out = removeToolCalls(out)
		case graphs.FilterLastUserMessage:
			out = lastUserMessage(out)
		case graphs.FilterNestHistory:
			out = nestHistory(out)
		case graphs.FilterKeepLast:
			out = keepLast(out, f.N)
		default:
			return nil, fmt.Errorf("%w: unknown input filter %q", ErrGraph, f.Kind)
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("%w: input filter %s left no message", ErrGraph, f.Kind)
		}
	}
	return out, nil
}

// removeToolCalls keeps user, assistant and system text: tool results go,
// and assistant messages lose their tool calls (and go too when that leaves
// them empty). Client system messages stay: they are context, not tools.
func removeToolCalls(in []Message) []Message {
	out := make([]Message, 0, len(in))
	for _, m := range in {
		switch {
		case m.Role == RoleTool:
			continue
		case len(m.ToolCalls) > 0:
			m.ToolCalls = nil
			if m.Content == "" && len(m.Parts) == 0 {
				continue
			}
		}
		out = append(out, m)
	}
	return out
}

// lastUserMessage keeps only the last user message.
func lastUserMessage(in []Message) []Message {
	for i := len(in) - 1; i >= 0; i-- {
		if in[i].Role == RoleUser {
			return []Message{in[i]}
		}
	}
	return nil
}

// keepLast keeps the last n messages, then drops tool results whose call was
// cut off.
func keepLast(in []Message, n int) []Message {
	if len(in) > n {
		in = in[len(in)-n:]
	}
	calls := make(map[string]bool)
	out := make([]Message, 0, len(in))
	for _, m := range in {
		for _, c := range m.ToolCalls {
			calls[c.ID] = true
		}
		if m.Role == RoleTool && !calls[m.ToolCallID] {
			continue
		}
		out = append(out, m)
	}
	return out
}

// nestHistory folds the transcript into one assistant message holding it as
// a <CONVERSATION HISTORY> block. Old routing notes lose their markers in
// the block; the routing note appended after the filter carries the one that
// counts.
func nestHistory(in []Message) []Message {
	if len(in) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString("For context, here is the conversation so far between the user and the previous agent:\n<CONVERSATION HISTORY>\n")
	for i, m := range in {
		fmt.Fprintf(&b, "%d. %s", i+1, m.Role)
		switch {
		case m.Role == RoleTool:
			fmt.Fprintf(&b, " (result of %s): %s", m.ToolCallID, m.Content)
		case len(m.ToolCalls) > 0:
			b.WriteString(":")
			if m.Content != "" {
				b.WriteString(" " + m.Content)
			}
			for _, c := range m.ToolCalls {
				fmt.Fprintf(&b, " [tool call %s %s(%s)]", c.ID, c.Function.Name, c.Function.Arguments)
			}
		default:
			b.WriteString(": " + m.Content)
		}
		b.WriteByte('\n')
	}
	b.WriteString("</CONVERSATION HISTORY>")
	return []Message{{Role: RoleAssistant, Content: b.String()}}
}
