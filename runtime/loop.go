package runtime

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/switchboard-ai/switchboard/graphs"
)

// The agent loop: an agent runs over a transcript until it answers, hands
// off (and the target goes on), suspends or hits a limit. It knows nothing
// of sessions: a session run gives it the session's history and a saver
// (session.go); a stateless run and a sub-agent run have neither.

// run is the state of one run.
type run struct {
	*Runner
	req  *Request
	sink Sink // the run's events go to it (emit)
	// streamed: the model call in flight sent text to the client.
	// pauser: the model call in flight took StreamPauser; batched: a
	// delta it sent waits for EventFlush (streampause.go). Beside sink:
	// every streamed delta reads or writes all four, and a stream that
	// waited for its next chunk finds the run gone cold: one cache line
	// for them all, not two (issue 22).
	streamed, pauser, batched bool

	info  RunInfo
	graph *graphs.Graph
	agent *graphs.Agent
	offer []ToolDef // tools offered to the current agent
	// mem are the run's memory slots, worked out once (memBound).
	mem      []boundSlot
	memBound bool
	// tools are the current agent's server tools: its own, then its
	// ToolSource's, read once per agent's turn at the run (agentTools).
	tools []*graphs.Tool
	// choice is the request's tool_choice, checked (toolchoice.go).
	choice toolChoice
	// noHandoffs offers the agent none of its handoffs (a sub-agent).
	noHandoffs bool
	emitMu     sync.Mutex // serialises Emit of concurrent tool calls
	usageMu    sync.Mutex // guards usage while a turn's sub-agents run
	resumed    bool       // the turn a previous request suspended is done

	// The run's messages are history followed by transcript. history is
	// the session as loaded, shared with the store and read only; the run
	// appends to transcript alone, so a turn of a long session never copies
	// what came before it.
	history    []Message
	histScan   promptScan // how history reads for a prompt
	transcript []Message

	// saver saves steps; nil for a run outside any session.
	saver *sessionSaver
	// The session's approvals (approvalBook): the run's own book, or for
	// a sub-agent's run the book of the run that asked it, so that a call
	// deep in a sub-agent pauses the session's run (nested.go).
	*approvalBook
	ownBook approvalBook
	// nest are the ids of the sub-agent calls this run runs under,
	// outermost first: empty for a request's run.
	nest []string
	// held is a new user message that came while the paused turn had
	// approved calls still to run (moveOn): resumeTurn runs them, then
	// adds held to the transcript, so that their results come before it.
	held []Message

	handoffs int
	usage    Usage
	external time.Duration // spent in providers, tools and hooks
	result   *Result       // set when an agent answered or the run suspended

	// Reused from call to call: a run allocates nothing for its seams.
	model     ModelCall
	agentCall AgentCall
	shared    runShared // the request's run's; a sub-agent run uses its parent's
	session   sessionSaver
}

// emit sends ev to the run's sink.
func (rn *run) emit(ev Event) { rn.sink.Emit(ev) }

// start runs the run's interceptor chain around the loop.
func (rn *run) start(ctx context.Context) (*Result, error) {
	rn.info.Agent = rn.agent
	return rn.chains.run(ctx, &rn.info)
}

// runBase is the innermost RunFunc: one agent's part after another until
// one answers or the run suspends.
func runBase(ctx context.Context, info *RunInfo) (*Result, error) {
	rn := info.rn
	for {
		call := &rn.agentCall
		*call = AgentCall{Run: info, Agent: rn.agent, rn: rn}
		if err := rn.chains.agent(ctx, call); err != nil {
			if h := (*Halt)(nil); errors.As(err, &h) {
				return rn.halted(h), nil
			}
			return nil, err
		}
		if rn.result != nil {
			return rn.result, nil
		}
		if call.Handoff == nil {
			return nil, fmt.Errorf("%w: agent %q stopped without an answer", ErrGraph, rn.agent.Name)
		}
		rn.agent, rn.offer, rn.tools = call.Handoff.Target, nil, nil
	}
}

// agentBase is the innermost AgentFunc: the agent's model turns. The run's
// first agent first finishes a turn a previous request suspended.
//
// A streamed answer is read from under callModel, for as long as it lasts:
// this loop's frame is on the stack of every open stream, so what needs a
// large frame (a turn's tool calls, the save, the errors) is in functions
// that return before the next model call (issue 22).
func agentBase(ctx context.Context, call *AgentCall) error {
	rn := call.rn
	rn.emit(Event{Kind: EventAgentStart, Agent: call.Agent.Name})
	if !rn.resumed {
		rn.resumed = true
		if done, err := rn.resumeTurn(ctx, call); done || err != nil {
			return err
		}
	}
	for {
		step, err := rn.nextStep()
		if err != nil {
			return err
		}
		resp, err := rn.callModel(ctx, step)
		if err != nil {
			return err
		}
		if done, err := rn.afterModel(ctx, call, resp); done || err != nil {
			return err
		}
	}
}

// resumeTurn finishes the turn a previous request suspended, if any; done
// when the agent's part of the run is over.
func (rn *run) resumeTurn(ctx context.Context, call *AgentCall) (done bool, err error) {
	before := len(rn.transcript)
	out, err := rn.resume(ctx)
	if err != nil {
		return true, err
	}
	if out.suspended == nil && len(rn.transcript) > before {
		// The resumed turn ran calls (approved ones, a waiting handoff):
		// a step of its own, saved before the next model call, so that a
		// run that fails after it does not run them again when the
		// request is retried (an approved refund issued twice). Written
		// now even by a run that saves at its end (a guarded one): the
		// step finishes the turn an earlier run paused, and a guardrail
		// that trips later in this run must not leave the calls unanswered
		// and their approvals open, to run again at every request.
		holder := rn.agent
		if out.handoff != nil {
			holder = out.handoff.Target
		}
		if err := rn.saveNow(ctx, holder); err != nil {
			return true, err
		}
	}
	if rn.held != nil {
		rn.transcript = append(rn.transcript, rn.held...)
		rn.held = nil
	}
	if out.suspended != nil {
		return true, rn.finish(ctx, out.message, out.reason, out.suspended)
	}
	if out.handoff != nil {
		call.Handoff = out.handoff
		return true, nil
	}
	return false, nil
}

// nextStep counts the model call about to be made, or refuses it past
// max_steps.
func (rn *run) nextStep() (int, error) {
	if n := rn.info.shared.steps.Load(); n >= int64(rn.graph.MaxSteps) {
		return 0, fmt.Errorf("%w: the run would need model call %d (max_steps %d)", ErrMaxSteps, n+1, rn.graph.MaxSteps)
	}
	return int(rn.info.shared.steps.Add(1)), nil
}

// afterModel takes a model's answer: the agent answered, or its tool
// calls run; done when the agent's part of the run is over.
func (rn *run) afterModel(ctx context.Context, call *AgentCall, resp *ChatResponse) (done bool, err error) {
	rn.allowedCalls(resp)
	msg := resp.Message
	if !rn.streamed && msg.Content != "" {
		// Not streamed (a request that is not, or a provider that answered
		// in one piece): the turn's text reaches the renderers whole, once
		// the call's checks passed, as a stream's deltas would, so that a
		// renderer shows each model turn's text alike either way (the
		// Responses API: a message item per turn).
		rn.emit(Event{Kind: EventDelta, Agent: rn.agent.Name, Text: msg.Content, Step: rn.model.Step})
	}
	msg.Role = RoleAssistant
	msg.Handoff = nil
	fillCallIDs(msg.ToolCalls)
	rn.transcript = append(rn.transcript, msg)
	if len(msg.ToolCalls) == 0 {
		return true, rn.finish(ctx, msg, resp.FinishReason, nil)
	}
	out, err := rn.turn(ctx, msg.ToolCalls)
	if err != nil {
		return true, err
	}
	if out.suspended != nil {
		return true, rn.finish(ctx, out.message, out.reason, out.suspended)
	}
	// The step's save records the agent that now holds the
	// conversation: the handoff's target when there was one.
	holder := rn.agent
	if out.handoff != nil {
		holder = out.handoff.Target
	}
	if err := rn.save(ctx, holder, false); err != nil {
		return true, err
	}
	if out.handoff != nil {
		call.Handoff = out.handoff
		return true, nil
	}
	return false, nil
}

// Steps is how many model calls the run (with its sub-agents and the run
// they belong to) has started.
func (ri *RunInfo) Steps() int { return int(ri.shared.steps.Load()) }

// finish saves the last step, giving the session's lock back in the same
// round trip, and records the result.
func (rn *run) finish(ctx context.Context, msg Message, reason string, s *Suspension) error {
	if s != nil {
		if err := rn.checkPause(ctx, s); err != nil {
			return err
		}
	}
	if err := rn.save(ctx, rn.agent, true); err != nil {
		return err
	}
	if s != nil {
		rn.notifyApprovals(ctx)
	}
	if reason == "" {
		reason = "stop"
	}
	rn.result = &Result{
		Agent:        rn.agent.Name,
		Message:      msg,
		FinishReason: reason,
		Usage:        rn.usage,
		Suspension:   s,
		ExternalTime: rn.external,
	}
	if rn.saver != nil {
		rn.result.Version = rn.saver.version
		rn.result.Point = pointAfter(rn.history, rn.transcript, rn.saver.version, rn.activeName(rn.agent))
	}
	if rn.info.Parent != nil {
		rn.result.transcript = rn.transcript
	}
	return nil
}

// halted is the result of a run an interceptor ended with a Halt.
func (rn *run) halted(h *Halt) *Result {
	res := &Result{
		Agent:        rn.agent.Name,
		Message:      Message{Role: RoleAssistant, Content: h.Content},
		FinishReason: h.FinishReason,
		Usage:        rn.usage,
		Halt:         h,
		ExternalTime: rn.external,
	}
	if rn.saver != nil {
		res.Version = rn.saver.version
	}
	return res
}

// failed is the error of a run that started: err with what the run had
// spent (RunError); nil when err is.
func (rn *run) failed(err error) error {
	if err == nil {
		return nil
	}
	rn.usageMu.Lock()
	defer rn.usageMu.Unlock()
	return &RunError{Usage: rn.usage, Err: err}
}

// save saves what the run added since the last save as one step, when the
// run has a session.
func (rn *run) save(ctx context.Context, holder *graphs.Agent, last bool) error {
	if rn.saver == nil {
		return nil
	}
	return rn.saver.save(ctx, rn, rn.activeName(holder), last)
}

// saveNow saves the run's steps so far at once, also in a run that saves
// at its end (SaveAtEnd).
func (rn *run) saveNow(ctx context.Context, holder *graphs.Agent) error {
	if rn.saver == nil {
		return nil
	}
	atEnd := rn.saver.atEnd
	rn.saver.atEnd = false
	defer func() { rn.saver.atEnd = atEnd }()
	return rn.saver.save(ctx, rn, rn.activeName(holder), false)
}

// activeName is the session's active agent after a step whose holder is
// holder: the `to` of its last handoff marker (CONTRACT §4.1), holder's
// after a handoff of this run, also when the requested graph lacked the
// marker's agent and its lead ran instead: the next request of a graph
// that has it runs it. A response's point records it too, for a fork.
func (rn *run) activeName(holder *graphs.Agent) string {
	if rn.handoffs > 0 {
		return holder.Name
	}
	// A pre_tool_call hook's rewrite of a resumed turn moves the history
	// into the transcript (prehook.go).
	for i := len(rn.transcript) - 1; i >= 0; i-- {
		if h := rn.transcript[i].Handoff; h != nil {
			return h.To
		}
	}
	if rn.histScan.marker != "" {
		return rn.histScan.marker
	}
	return holder.Name
}

// messages returns the run's whole transcript, history first; it copies
// when there is history, which only input filters need.
func (rn *run) messages() []Message {
	if len(rn.history) == 0 {
		return rn.transcript
	}
	return append(slices.Clip(rn.history), rn.transcript...)
}

// checkClientTools rejects a client tool named like a tool or handoff of the
// active agent (the call could not be told apart), and a tool_choice the
// agent cannot honour.
func (rn *run) checkClientTools() error {
	for _, t := range rn.req.ClientTools {
		if rn.serverTool(t.Name) != nil || agentHandoff(rn.agent, t.Name) != nil || rn.memoryTool(t.Name) != nil {
			return fmt.Errorf("%w: client tool %q clashes with a tool or handoff of agent %q", ErrInvalidRequest, t.Name, rn.agent.Name)
		}
	}
	return rn.checkToolChoice()
}

// fillCallIDs gives an id to every tool call that came without one (some
// local models omit them), and the type "function" to one without a type:
// results are matched to calls by id. This is the one place ids are made.
func fillCallIDs(calls []ToolCall) {
	for i := range calls {
		if calls[i].ID == "" {
			calls[i].ID = newCallID()
		}
		if calls[i].Type == "" {
			calls[i].Type = "function"
		}
	}
}

// newCallID returns a fresh "call_..." id, unique in any transcript.
func newCallID() string {
	const digits = "0123456789abcdef"
	b := []byte("call_sb_000000000000000000000000")
	for i := len("call_sb_"); i < len(b); i++ {
		b[i] = digits[rand.N(16)]
	}
	return string(b)
}
