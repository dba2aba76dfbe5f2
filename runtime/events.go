package runtime

import "time"

// EventKind tells what an Event reports.
type EventKind int

// The events a run emits, in the order they happen.
const (
	// EventAgentStart: Agent takes the run (the first agent, or a handoff
	// target). Emitted before the agent's first model call.
	EventAgentStart EventKind = iota + 1
	// EventDelta: Text is the next piece of Agent's reply, as the provider
	// produced it (streamed runs only).
	EventDelta
	// EventHandoff: an accepted handoff From -> To by the call ToolCallID.
	EventHandoff
	// EventSubagentStart: Agent asked the sub-agent Subagent by the call
	// ToolCallID, whose run begins.
	EventSubagentStart
	// EventSubagentDelta: Text is the next piece of the sub-agent's text
	// (streamed runs only). It is not the run's answer.
	EventSubagentDelta
	// EventSubagentDone: the sub-agent answered; its answer is the call's
	// tool result.
	EventSubagentDone
	// EventFlush: the model paused (StreamPauser), or its call ended, after
	// Batched deltas: what a renderer held of them must go now.
	EventFlush
)

// Event is one thing that happened during a run. The gateway renders events
// as SSE chunks; a non-streaming reply only needs the Result.
type Event struct {
	Kind       EventKind
	Agent      string
	Text       string
	From, To   string
	ToolCallID string
	// Subagent names the sub-agent of an EventSubagent* event.
	Subagent string
	// Step is the number of the model call an EventDelta's (or an
	// EventSubagentDelta's) text comes from (ModelCall.Step): a renderer
	// that shows each model turn's text as a message of its own tells one
	// turn's text from the next by it.
	Step int
	// Batched is set on an EventDelta that an EventFlush will follow
	// before the run waits on anything (streampause.go): a renderer may
	// hold it, to send it with the deltas after it.
	Batched bool
}

// Sink takes the events of a run (Runner.RunTo), one at a time.
type Sink interface {
	Emit(Event)
}

// EmitFunc is a function as a Sink.
type EmitFunc func(Event)

// Emit calls f.
func (f EmitFunc) Emit(ev Event) { f(ev) }

// dropEvents is the Sink of a run whose events no one takes.
type dropEvents struct{}

func (dropEvents) Emit(Event) {}

// Result is the outcome of a run that finished.
type Result struct {
	// Agent answered last.
	Agent string
	// Message is the final assistant message. When the run stopped for
	// client tools, its ToolCalls are the client's calls only.
	Message      Message
	FinishReason string // "stop", "length", "tool_calls", ...
	Usage        Usage
	// Suspension is set when the run stopped for calls someone outside
	// must answer (client tools, approvals); the session's next request
	// resumes it.
	Suspension *Suspension
	// Halt is set when an interceptor ended the run with its own answer.
	Halt *Halt
	// Version is the session's version after the run (0 when stateless).
	Version int64
	// Point is where the session stands after the run (zero when
	// stateless): a later request may continue from it (Request.At).
	Point Point
	// ExternalTime is the time spent waiting on providers, tools and hooks;
	// the rest of a request's time is the gateway's own overhead.
	ExternalTime time.Duration
	// transcript is a sub-agent run's transcript, which its caller keeps
	// when the sub-agent pauses (nested.go).
	transcript []Message
}
