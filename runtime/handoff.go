package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/internal/freshstack"
	"github.com/switchboard-ai/switchboard/internal/redact"
)

// routingNotePrefix starts every routing note; the text is for the model,
// the marker on the message is what the gateway trusts.
const routingNotePrefix = "[routing note - not from the user] handoff "

// orderedArgs are a handoff call's validated arguments.
type orderedArgs struct {
	values map[string]any
	// keys in schema order, then any others sorted.
	keys []string
}

// parseArgs decodes a handoff call's arguments and validates them against
// the handoff's input schema.
func parseArgs(h *graphs.Handoff, raw string) (orderedArgs, error) {
	if strings.TrimSpace(raw) == "" {
		raw = "{}"
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(raw))
	if err != nil {
		return orderedArgs{}, fmt.Errorf("arguments are not valid JSON: %v", err)
	}
	if h.Schema != nil {
		if err := h.Schema.Validate(v); err != nil {
			var ve *jsonschema.ValidationError
			if errors.As(err, &ve) {
				return orderedArgs{}, fmt.Errorf("arguments do not match the input schema: %s", strings.Join(leafErrors(ve), "; "))
			}
			return orderedArgs{}, fmt.Errorf("arguments do not match the input schema: %v", err)
		}
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return orderedArgs{}, fmt.Errorf("arguments must be a JSON object")
	}
	a := orderedArgs{values: obj, keys: make([]string, 0, len(obj))}
	for _, k := range h.ArgOrder {
		if _, ok := obj[k]; ok {
			a.keys = append(a.keys, k)
		}
	}
	var extra []string
	for k := range obj {
		if !slices.Contains(h.ArgOrder, k) {
			extra = append(extra, k)
		}
	}
	slices.Sort(extra)
	a.keys = append(a.keys, extra...)
	return a, nil
}

// leafErrors flattens a validation error into short "at /path: why" lines.
func leafErrors(ve *jsonschema.ValidationError) []string {
	if len(ve.Causes) == 0 {
		// The leaf's own text says where and why: "at '/orderId': got
		// number, want string", "at '': missing property 'orderId'".
		return []string{ve.Error()}
	}
	var out []string
	for _, c := range ve.Causes {
		out = append(out, leafErrors(c)...)
	}
	return out
}

// routingNote is the text of the note appended at a handoff (docs/handoffs.md).
func routingNote(from, to string, a orderedArgs) string {
	var b strings.Builder
	b.WriteString(routingNotePrefix + from + " -> " + to)
	for i, k := range a.keys {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString(", ")
		}
		b.WriteString(k + "=" + jsonString(a.values[k]))
	}
	return b.String()
}

// jsonString encodes v as JSON without HTML escaping, for text read by
// models and people.
func jsonString(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return `""`
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

// considerHandoff is the innermost ToolFunc of a handoff call: the
// arguments are validated against the handoff's schema, then the run's
// handoff limit is checked. An accepted call's result is written by
// acceptHandoff, after the turn's other results.
//
// It runs aside (freshstack): under the run loop and the tool chain,
// decoding, validating and re-encoding the arguments went past the 7 KB
// that keeps the goroutine, which goes on to read the next agent's
// stream, at an 8 KB stack (issue 22).
func (rn *run) considerHandoff(inv *ToolInvocation) (res ToolResult) {
	freshstack.Run(func() { res = rn.considerHandoffHere(inv) })
	return res
}

// considerHandoffHere is considerHandoff on the caller's stack.
func (rn *run) considerHandoffHere(inv *ToolInvocation) ToolResult {
	a := inv.args
	if inv.argsOf != inv.Call.Function.Arguments || a.values == nil {
		// Not read as the turn was sorted, or rewritten since (a
		// pre_tool_call hook).
		var err error
		if a, err = parseArgs(inv.Handoff, inv.Call.Function.Arguments); err != nil {
			return ToolError(codeInvalidArgs, err.Error())
		}
	}
	if rn.handoffs >= rn.graph.MaxHandoffs {
		return ToolError(codeLimitExceeded, fmt.Sprintf("max_handoffs (%d) reached in this run; answer the user yourself", rn.graph.MaxHandoffs))
	}
	inv.args = a
	return ToolResult{Content: `{"assistant": ` + jsonString(inv.Handoff.Target.Name) + `}`}
}

// acceptHandoff writes an accepted handoff into the transcript: its tool
// result, the on_handoff hook, the input filter, then the routing note that
// carries the marker (docs/handoffs.md).
func (rn *run) acceptHandoff(ctx context.Context, inv *ToolInvocation) error {
	h := inv.Handoff
	from, to := rn.agent.Name, h.Target.Name
	rn.handoffs++
	rn.transcript = append(rn.transcript, toolResult(inv.Call.ID, `{"assistant": `+jsonString(to)+`}`))
	if h.OnHandoff != nil {
		rn.callHook(ctx, h, from, to, inv.args)
	}
	if len(h.Filters) > 0 {
		filtered, err := applyFilters(rn.messages(), h.Filters)
		if err != nil {
			return fmt.Errorf("handoff %s -> %s: %w", from, to, err)
		}
		// The filtered messages become the whole session: the next save
		// replaces what is stored. They may share memory with the history,
		// which the run must not write to: the transcript gets its own.
		rn.history, rn.histScan = nil, newPromptScan()
		rn.transcript = append(make([]Message, 0, len(filtered)+4), filtered...)
		if rn.saver != nil {
			rn.saver.replaced()
		}
	}
	rn.transcript = append(rn.transcript, Message{
		Role:    RoleSystem,
		Content: routingNote(from, to, inv.args),
		Handoff: &Marker{From: from, To: to},
	})
	rn.emit(Event{Kind: EventHandoff, Agent: to, From: from, To: to, ToolCallID: inv.Call.ID})
	return nil
}

// callHook calls on_handoff; a failure is logged and traced, never fatal.
func (rn *run) callHook(ctx context.Context, h *graphs.Handoff, from, to string, args orderedArgs) {
	if rn.opts.Hooks == nil {
		return
	}
	start := time.Now()
	payload := map[string]any{"from": from, "to": to, "args": args.values, "sessionId": rn.req.SessionID}
	err := rn.opts.Hooks.Call(ctx, h.OnHandoff, payload)
	rn.external += time.Since(start)
	if err != nil {
		rn.log.Warn("on_handoff hook failed", "from", from, "to", to, "url", redact.URL(h.OnHandoff.URL), "err", err)
		traceHookFailure(ctx, h.OnHandoff.URL, err)
	}
}
