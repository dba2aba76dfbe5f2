package runtime

import "github.com/switchboard-ai/switchboard/graphs"

// A run that cannot go on until someone outside acts suspends: the step is
// saved, the session released (a suspended run holds no lock), and the
// Result carries a Suspension. The session's next request resumes the turn
// (resume in turn.go): calls that have a result by then are done, the others
// pass the tool chain again, and a handoff of the turn waits until no call of
// it is pending.

// Suspension reasons. Interceptors add their own (a permission gate's
// "approval_required") through ToolResult.Suspend.
const (
	// SuspendClientTools: the model called the client's own tools; the run
	// goes on when the client sends their results.
	SuspendClientTools = "client_tools"
)

// Suspension is why a run stopped before an agent answered, and what it
// waits for.
type Suspension struct {
	// Reason is SuspendClientTools when the turn called client tools (the
	// reply is finish_reason "tool_calls"), else the first pending call's.
	Reason string
	// Pending are the calls the run waits for: the client's, then those
	// interceptors held, each in the model's order.
	Pending []PendingCall
}

// PendingCall is one call a suspended run waits for.
type PendingCall struct {
	Call ToolCall
	// Agent is the agent that made the call.
	Agent string
	// Reason is SuspendClientTools or the ToolResult.Suspend that held it.
	Reason string
	// Data is the ToolResult.Data of the interceptor that held it.
	Data any
}

// Halt ends a run early with an answer of its own instead of an error: an
// interceptor returns it (wrapped or not) from a model, tool or agent
// function, e.g. a guardrail that tripped. The step in flight is not saved;
// the Result has FinishReason, a message with Content, and Halt set, so
// that a renderer can add what the interceptor put in Metadata.
type Halt struct {
	FinishReason string
	Content      string
	Metadata     map[string]any
	// CallUsage is what the model call the halt stopped had spent, when
	// that call had answered (its tokens count in metrics and on its span
	// as any call's).
	CallUsage Usage
}

// Error implements error.
func (h *Halt) Error() string { return "run halted: " + h.FinishReason }

// suspension builds the Suspension of a turn's pending calls.
func suspension(a *graphs.Agent, client []ToolCall, held []PendingCall) *Suspension {
	s := &Suspension{}
	for _, c := range client {
		s.Pending = append(s.Pending, PendingCall{Call: c, Agent: a.Name, Reason: SuspendClientTools})
	}
	s.Pending = append(s.Pending, held...)
	if len(client) > 0 {
		s.Reason = SuspendClientTools
	} else if len(held) > 0 {
		s.Reason = held[0].Reason
	}
	return s
}
