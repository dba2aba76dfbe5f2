package providers

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/switchboard-ai/switchboard/runtime"
)

// demoModel is the built-in offline model (provider kind "demo"): no
// network, deterministic, so that `switchboard serve` with no config
// answers curl at once and shows a routed answer. Any model name works.
//
// It reads the request like this:
//
//   - Tool call: when the last non-system message is the user's and one of
//     the offered tools shares words with it, it calls the best such tool.
//     Words are lowercased runs of letters and digits of 4 or more, minus a
//     few common ones ("with", "please", "user", "transfer", ...); a user
//     word matches a tool word (from the tool's name and description) when
//     they are equal, one is a prefix of the other, or they share their
//     first 5 letters ("charged" matches "charges"). The score is the number
//     of user words that match; the highest wins, ties go to the first
//     offered. Only tools whose parameters require nothing but `reason`
//     can be called (the demo cannot invent other arguments); arguments
//     are {"reason": "<user text, at most 80 characters>"} when the schema
//     has a `reason` property, else {}. It never hands straight back to the
//     agent named as `from` in the last routing note of its system prompt,
//     so two demo agents cannot bounce a user between them.
//   - Text otherwise: "<Name> here (Switchboard demo model): I got your
//     message "<last user text>". ..." where Name comes from the system
//     prompt's first sentence ("You are the billing desk." -> "Billing
//     desk"; "Assistant" when it does not start with "You are"). After a
//     handoff it says whom it takes over from; after a server tool it quotes
//     the tool's result.
//
// Usage counts words: the words of every message for the prompt, the words
// of the answer (or of the call) for the completion. A streamed call sends
// the answer word by word.
type demoModel struct{}

var _ runtime.Model = demoModel{}

// Chat answers req as described on demoModel.
func (demoModel) Chat(ctx context.Context, req *runtime.ChatRequest, onDelta func(string)) (*runtime.ChatResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("provider demo: %w", err)
	}
	var system string
	msgs := req.Messages.Flat()
	if len(msgs) > 0 && msgs[0].IsSystem() {
		system = msgs[0].Content
	}
	var last, lastUser *runtime.Message
	for i := len(msgs) - 1; i >= 0; i-- {
		m := &msgs[i]
		if m.IsSystem() {
			continue
		}
		if last == nil {
			last = m
		}
		if m.Role == runtime.RoleUser {
			lastUser = m
			break
		}
	}
	prompt := 0
	for _, m := range msgs {
		prompt += len(strings.Fields(m.Content))
	}
	id := "chatcmpl-demo-" + demoHash(msgs, "")

	if last != nil && last == lastUser {
		if tool, ok := pickTool(req.Tools, lastUser.Content, handedOffBy(system)); ok {
			args := []byte("{}")
			if schemaHasReason(tool.Parameters) {
				args, _ = json.Marshal(map[string]string{"reason": truncate(lastUser.Content, 80)})
			}
			call := runtime.ToolCall{ID: "call_demo_" + demoHash(msgs, tool.Name), Type: "function",
				Function: runtime.FunctionCall{Name: tool.Name, Arguments: string(args)}}
			completion := len(strings.Fields(tool.Name + " " + string(args)))
			return &runtime.ChatResponse{
				ID:           id,
				Message:      runtime.Message{Role: runtime.RoleAssistant, ToolCalls: []runtime.ToolCall{call}},
				FinishReason: "tool_calls",
				Usage:        runtime.Usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion},
			}, nil
		}
	}

	text := demoText(system, msgs, last, lastUser)
	if req.Stream && onDelta != nil {
		for _, w := range strings.SplitAfter(text, " ") {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("provider demo: %w", err)
			}
			onDelta(w)
		}
	}
	completion := len(strings.Fields(text))
	return &runtime.ChatResponse{
		ID:           id,
		Message:      runtime.Message{Role: runtime.RoleAssistant, Content: text},
		FinishReason: "stop",
		Usage:        runtime.Usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion},
	}, nil
}

// demoText is the demo's text answer.
func demoText(system string, msgs []runtime.Message, last, lastUser *runtime.Message) string {
	var b strings.Builder
	b.WriteString(agentName(system))
	b.WriteString(" here (Switchboard demo model)")
	if last != nil && last.Role == runtime.RoleTool {
		var accepted struct {
			Assistant string `json:"assistant"`
		}
		if json.Unmarshal([]byte(last.Content), &accepted) == nil && accepted.Assistant != "" {
			if from := handedOffBy(system); from != "" {
				fmt.Fprintf(&b, ", taking over from %s", from)
			}
		} else {
			fmt.Fprintf(&b, ". The tool %s returned: %s", toolNameOf(msgs, last.ToolCallID), truncate(last.Content, 120))
		}
	}
	if lastUser != nil {
		fmt.Fprintf(&b, ". I got your message %q.", truncate(lastUser.Content, 200))
	} else {
		b.WriteString(". I got no message from you.")
	}
	b.WriteString(" I am an offline demo; give this agent a real model for real answers.")
	return b.String()
}

// agentName derives a name from the system prompt's first sentence:
// "You are the billing desk." gives "Billing desk".
func agentName(system string) string {
	s := strings.TrimSpace(system)
	if i := strings.IndexAny(s, ".!?,;:\n"); i >= 0 {
		s = s[:i]
	}
	lower := strings.ToLower(s)
	var rest string
	for _, p := range []string{"you are ", "you're "} {
		if strings.HasPrefix(lower, p) {
			rest = strings.TrimSpace(s[len(p):])
			break
		}
	}
	for _, article := range []string{"the ", "a ", "an "} {
		if len(rest) > len(article) && strings.EqualFold(rest[:len(article)], article) {
			rest = strings.TrimSpace(rest[len(article):])
			break
		}
	}
	if rest == "" {
		return "Assistant"
	}
	r, n := utf8.DecodeRuneInString(rest)
	return string(unicode.ToUpper(r)) + rest[n:]
}

// routingMarker starts the handoff part of a routing note (docs/handoffs.md).
const routingMarker = "[routing note - not from the user] handoff "

// handedOffBy returns the `from` of the last routing note in the system
// prompt, or "".
func handedOffBy(system string) string {
	i := strings.LastIndex(system, routingMarker)
	if i < 0 {
		return ""
	}
	from, _, ok := strings.Cut(system[i+len(routingMarker):], " -> ")
	if !ok {
		return ""
	}
	return from
}

// toolNameOf finds the name of the call id among the assistant messages.
func toolNameOf(msgs []runtime.Message, id string) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		for _, c := range msgs[i].ToolCalls {
			if c.ID == id {
				return c.Function.Name
			}
		}
	}
	return "tool"
}

// truncate cuts s to at most n runes, marking the cut with "...".
func truncate(s string, n int) string {
	s = strings.TrimSpace(s)
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-3]) + "..."
}

// demoHash is a short stable hash of the transcript and salt, for ids.
func demoHash(msgs []runtime.Message, salt string) string {
	h := fnv.New64a()
	for _, m := range msgs {
		h.Write([]byte(m.Role))
		h.Write([]byte{0})
		h.Write([]byte(m.Content))
		h.Write([]byte{0})
	}
	h.Write([]byte(salt))
	return fmt.Sprintf("%016x", h.Sum64())
}
