package runtime

import "strings"

// isToolResult reports whether m is a tool message.
func isToolResult(m Message) bool { return m.Role == RoleTool }

// checkOwed refuses a request that answers some of the client's calls of
// the last assistant message but not all (CONTRACT §3.2: the client sends
// the tool results, and the run goes on). OpenAI refuses such a request
// too; run on, the model would read a turn whose calls are cut short, and
// a call the gateway would run in that turn (a handoff that waited for the
// client) would be lost with them. msgs are the run's messages, history
// first; the new input is their last n. A request that brings no result,
// or a new user message (the user moved on, docs/http-api.md), is not
// refused here.
func (rn *run) checkOwed(msgs []Message, n int) error {
	ai := lastAssistant(msgs)
	if ai < 0 || len(msgs[ai].ToolCalls) == 0 || ai >= len(msgs)-n {
		return nil
	}
	answered := map[string]bool{}
	results := false
	for i, m := range msgs[ai+1:] {
		fresh := ai+1+i >= len(msgs)-n
		switch {
		case m.Role == RoleUser && fresh:
			return nil
		case m.Role == RoleTool:
			answered[m.ToolCallID] = true
			results = results || fresh
		}
	}
	if !results {
		return nil
	}
	var missing []string
	for _, c := range msgs[ai].ToolCalls {
		if !answered[c.ID] && rn.classify(c).kind == callClient {
			missing = append(missing, c.ID)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return paramError("messages", "no tool output found for the tool calls %s: a request that answers the last assistant message's tool calls must answer each of them", strings.Join(missing, ", "))
}
