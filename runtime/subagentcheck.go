package runtime

import (
	"context"
	"strings"
	"sync"
)

// On a stream a sub-agent's text reaches the client as it goes, in
// EventSubagentDelta events (CONTRACT §8): text the gateway delivers,
// which output guardrails check before the client sees it (§7). An
// interceptor that checks it sets a SubagentCheck on the request's run;
// the sub-agent calls of that run then hold their events, in order, until
// the call ended and its text passed. The hold is made here, in the
// sub-agent's runner, and not by a tool interceptor, whose frame every
// tool call, a handoff's too, would carry on a stream's stack (issue 22).

// SubagentCheck judges the text a sub-agent call streamed, before the
// client sees it: nil lets it through; an error (a *Halt for a trip) ends
// the run.
type SubagentCheck func(ctx context.Context, call *ToolInvocation, text string) error

// subagentCheckKey keys a run's SubagentCheck in its RunInfo values.
type subagentCheckKey struct{}

// SetSubagentCheck has the request's run's streamed sub-agent calls
// checked by check.
func (ri *RunInfo) SetSubagentCheck(check SubagentCheck) { ri.SetValue(subagentCheckKey{}, check) }

// subagentHolder holds a sub-agent call's events while it runs.
type subagentHolder struct {
	mu   sync.Mutex
	held []Event
	text strings.Builder
	// from is the sub-agent call and model call the text's last delta
	// came from: the texts of two are parted by a blank line, so that a
	// check never reads one text made of two (a pattern across them).
	from Event
}

// holdFor returns the holder of a sub-agent call of the request's run
// (its own sub-agents' events pass through it), or nil when nothing
// checks its work or no client sees it.
func holdFor(call *ToolInvocation) (*subagentHolder, SubagentCheck) {
	if call.Run.Parent != nil || !call.Run.Stream {
		return nil, nil
	}
	check, _ := call.Run.Value(subagentCheckKey{}).(SubagentCheck)
	if check == nil {
		return nil, nil
	}
	return &subagentHolder{}, check
}

// emit holds one event.
func (h *subagentHolder) emit(ev Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held = append(h.held, ev)
	if ev.Kind == EventSubagentDelta {
		if h.text.Len() > 0 && (ev.ToolCallID != h.from.ToolCallID || ev.Subagent != h.from.Subagent || ev.Step != h.from.Step) {
			h.text.WriteString("\n\n")
		}
		h.from = Event{ToolCallID: ev.ToolCallID, Subagent: ev.Subagent, Step: ev.Step}
		h.text.WriteString(ev.Text)
	}
}

// release checks the held text, then sends the held events to emit; an
// error of the check is returned and nothing is sent.
func (h *subagentHolder) release(ctx context.Context, call *ToolInvocation, check SubagentCheck, emit func(Event)) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t := h.text.String(); t != "" {
		if err := check(ctx, call, t); err != nil {
			return err
		}
	}
	for _, ev := range h.held {
		emit(ev)
	}
	h.held = nil
	return nil
}
