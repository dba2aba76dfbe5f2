package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/internal/redact"
	"github.com/switchboard-ai/switchboard/telemetry/genai"
)

// A graph's pre_tool_call hook (docs/permissions.md) is asked about every
// call the gate sees before the rules are read. It may rewrite the call's
// arguments and answers allow, deny or ask; the stricter of its action and
// the rules' wins. The HTTP side lives outside runtime (package webhooks).

// PreToolCallHook asks a graph's pre_tool_call webhook about one call.
type PreToolCallHook interface {
	// PreToolCall POSTs call to hook and returns its answer, parsed with
	// ParseHookVerdict. Any error denies the call.
	PreToolCall(ctx context.Context, hook *graphs.Hook, call *HookCall) (HookVerdict, error)
}

// HookCall is the body a pre_tool_call hook is POSTed.
type HookCall struct {
	Agent string `json:"agent"`
	Tool  string `json:"tool"`
	// Arguments are the model's, as a JSON object ({} when they are not
	// one), as in an approval.
	Arguments  json.RawMessage   `json:"arguments"`
	ToolCallID string            `json:"toolCallId"`
	SessionID  string            `json:"sessionId"`
	Principal  string            `json:"principal"`
	Metadata   map[string]string `json:"metadata"`
}

// HookVerdict is a pre_tool_call hook's answer.
type HookVerdict struct {
	Action graphs.Action
	// Arguments replace the model's when not nil; always a JSON object.
	Arguments json.RawMessage
	Reason    string
}

// ErrHookAnswer is wrapped by ParseHookVerdict for an answer that is not
// one a hook may give.
var ErrHookAnswer = errors.New("not a pre_tool_call answer")

// ParseHookVerdict reads a hook's answer {"action": "allow"|"deny"|"ask",
// "arguments": {...}?, "reason": "..."?}. Anything else, including an
// unknown action or arguments that are not an object, is an error wrapping
// ErrHookAnswer: the call is denied (fail closed).
func ParseHookVerdict(body []byte) (HookVerdict, error) {
	var raw struct {
		Action    *string         `json:"action"`
		Arguments json.RawMessage `json:"arguments"`
		Reason    *string         `json:"reason"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return HookVerdict{}, fmt.Errorf("%w: the answer is not a JSON object", ErrHookAnswer)
	}
	if raw.Action == nil {
		return HookVerdict{}, fmt.Errorf("%w: the answer has no action", ErrHookAnswer)
	}
	v := HookVerdict{Action: graphs.Action(*raw.Action)}
	switch v.Action {
	case graphs.ActionAllow, graphs.ActionDeny, graphs.ActionAsk:
	default:
		return HookVerdict{}, fmt.Errorf("%w: unknown action %q (want allow, deny or ask)", ErrHookAnswer, *raw.Action)
	}
	if raw.Reason != nil {
		v.Reason = *raw.Reason
	}
	if len(raw.Arguments) > 0 && !bytes.Equal(raw.Arguments, []byte("null")) {
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw.Arguments, &obj) != nil || obj == nil {
			return HookVerdict{}, fmt.Errorf("%w: arguments must be a JSON object", ErrHookAnswer)
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw.Arguments); err != nil {
			return HookVerdict{}, fmt.Errorf("%w: arguments must be a JSON object", ErrHookAnswer)
		}
		v.Arguments = buf.Bytes()
	}
	return v, nil
}

// errNoHookCaller fails the calls of a graph with a pre_tool_call hook
// when the Runner has no PreToolCallHook to call it with.
var errNoHookCaller = errors.New("no pre_tool_call caller configured")

// askHook asks the graph's pre_tool_call hook about inv, under a span of its
// own (the arguments are never put on it).
func (g permissionGate) askHook(ctx context.Context, inv *ToolInvocation, hook *graphs.Hook) (HookVerdict, error) {
	rn := inv.rn
	ctx, span := g.tracer.Start(ctx, "pre_tool_call "+inv.Call.Function.Name, trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		span.SetAttributes(
			genai.ToolName.String(inv.Call.Function.Name),
			genai.ToolCallID.String(inv.Call.ID),
			attribute.String("url.full", redact.URL(hook.URL)),
		)
	}
	v, err := HookVerdict{}, errNoHookCaller
	if c := rn.opts.PreToolCall; c != nil {
		md := inv.Run.Metadata
		if md == nil {
			md = map[string]string{}
		}
		v, err = c.PreToolCall(ctx, hook, &HookCall{
			Agent: inv.Agent.Name, Tool: inv.Call.Function.Name, Arguments: objectArgs(inv.Call.Function.Arguments),
			ToolCallID: inv.Call.ID, SessionID: inv.Run.sessionOfRun(), Principal: inv.Run.Principal, Metadata: md,
		})
	}
	if err != nil {
		rn.log.Warn("pre_tool_call hook failed; the call is denied", "tool", inv.Call.Function.Name, "call", inv.Call.ID, "url", redact.URL(hook.URL), "err", err)
		endSpan(span, err)
		return HookVerdict{}, err
	}
	if span.IsRecording() {
		span.SetAttributes(genai.PermissionHookAction.String(string(v.Action)))
	}
	span.End()
	return v, nil
}

// objectArgs returns a call's arguments when they are a JSON object, else {}.
func objectArgs(s string) json.RawMessage {
	args := json.RawMessage(s)
	var obj map[string]json.RawMessage
	if json.Unmarshal(args, &obj) != nil || obj == nil {
		return json.RawMessage(`{}`)
	}
	return args
}

// rewriteArgs puts the hook's arguments in place of the model's: in the
// call the tool, the handoff and the approval see, and in the turn's
// assistant message, so that the session and the model's next turn read
// what ran (a hook that redacts leaves nothing of the original stored).
func (rn *run) rewriteArgs(inv *ToolInvocation, args json.RawMessage) {
	inv.Call.Function.Arguments = string(args)
	rn.apprMu.Lock() // a turn's tools run concurrently
	defer rn.apprMu.Unlock()
	if i := lastAssistant(rn.transcript); i >= 0 {
		if m, ok := withArgs(rn.transcript[i], inv.Call.ID, string(args)); ok {
			rn.transcript[i] = m
			return
		}
	}
	// A resumed turn (its handoff waited): the assistant message is in the
	// stored history, which is read only; the next save rewrites the
	// session with the new message, as an input filter's does.
	hi := lastAssistant(rn.history)
	if hi < 0 {
		return
	}
	m, ok := withArgs(rn.history[hi], inv.Call.ID, string(args))
	if !ok {
		return
	}
	msgs := append(make([]Message, 0, len(rn.history)+len(rn.transcript)+4), rn.history...)
	msgs = append(msgs, rn.transcript...)
	msgs[hi] = m
	rn.history, rn.histScan, rn.transcript = nil, newPromptScan(), msgs
	if rn.saver != nil {
		rn.saver.replaced()
	}
}

// withArgs returns m with the arguments of its call id replaced, on a copy
// of its tool calls (m's may be shared).
func withArgs(m Message, callID, args string) (Message, bool) {
	for i := range m.ToolCalls {
		if m.ToolCalls[i].ID == callID {
			calls := append([]ToolCall(nil), m.ToolCalls...)
			calls[i].Function.Arguments = args
			m.ToolCalls = calls
			return m, true
		}
	}
	return m, false
}
