package fakeupstream

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// SetStrict makes the server reject, with a 400 as a strict server (or a
// local model's chat template) would, any request that breaks these rules:
// a system or developer message only first; content on every message but
// an assistant message that calls tools; every tool result right after the
// call it answers (among the results of that assistant message); every
// tool call answered before the next other message; a tool_choice only with
// tools, and a named one only for a tool the request offers (as OpenAI
// answers). Off by default.
func (s *Server) SetStrict(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.strict = on
}

// strictProblem returns why body breaks the strict rules, or "".
func strictProblem(body []byte) string {
	var req struct {
		Messages []map[string]json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return "invalid JSON: " + err.Error()
	}
	if problem := toolChoiceProblem(body); problem != "" {
		return problem
	}
	var msgs []Message
	if err := json.Unmarshal(body, &struct {
		Messages *[]Message `json:"messages"`
	}{&msgs}); err != nil {
		return "invalid messages: " + err.Error()
	}
	pending := map[string]bool{} // calls of the last assistant message not yet answered
	for i, m := range msgs {
		raw, hasContent := req.Messages[i]["content"]
		if hasContent && bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			hasContent = false
		}
		switch {
		case m.Role == "system" || m.Role == "developer":
			if i != 0 {
				return fmt.Sprintf("messages[%d]: a %s message after the first message", i, m.Role)
			}
		case m.Role == "tool":
			if !pending[m.ToolCallID] {
				return fmt.Sprintf("messages[%d]: tool result %s does not follow its call", i, m.ToolCallID)
			}
			delete(pending, m.ToolCallID)
		default:
			if len(pending) > 0 {
				return fmt.Sprintf("messages[%d]: %d tool call(s) of the previous assistant message have no result", i, len(pending))
			}
			if m.Role == "assistant" {
				for _, c := range m.ToolCalls {
					pending[c.ID] = true
				}
			}
		}
		if !hasContent && (m.Role != "assistant" || len(m.ToolCalls) == 0) {
			return fmt.Sprintf("messages[%d]: a %s message without content", i, m.Role)
		}
	}
	if len(pending) > 0 {
		return fmt.Sprintf("%d tool call(s) of the last assistant message have no result", len(pending))
	}
	return ""
}

// toolChoiceProblem returns why body's tool_choice would be refused, or "".
func toolChoiceProblem(body []byte) string {
	var req struct {
		Tools      []Tool          `json:"tools"`
		ToolChoice json.RawMessage `json:"tool_choice"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return "invalid JSON: " + err.Error()
	}
	if len(req.ToolChoice) == 0 || string(req.ToolChoice) == "null" {
		return ""
	}
	if len(req.Tools) == 0 {
		return "tool_choice is only allowed when tools are specified"
	}
	var named struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(req.ToolChoice, &named) != nil || named.Function.Name == "" {
		return ""
	}
	for _, t := range req.Tools {
		if t.Function.Name == named.Function.Name {
			return ""
		}
	}
	return "tool_choice names function " + named.Function.Name + ", which is not among the tools"
}
