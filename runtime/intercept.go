package runtime

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/switchboard-ai/switchboard/graphs"
)

// Interceptor wraps the calls a run makes, in the manner of go-redis's
// Hook: each method is given the next function of its chain and returns the
// function to call instead. An interceptor may act before and after next,
// change the call it is given, answer without calling next, or fail.
// Cross-cutting work lives here instead of in the loop: the Runner's own
// spans and metrics are an Interceptor (observe.go), and so are permission
// gates, guardrails and budgets.
//
// Chains are built once, by New, in the order of Options.Interceptors (the
// first is outermost, inside the Runner's own spans and metrics): a Runner
// with no interceptors pays nothing for the seam. Embed BaseInterceptor to
// implement only some of the methods.
type Interceptor interface {
	// InterceptRun wraps a whole run: a request's, or a sub-agent's (whose
	// RunInfo has a Parent). It runs after the session was loaded and
	// locked, and before any agent takes the run.
	InterceptRun(next RunFunc) RunFunc
	// InterceptAgent wraps one agent's part of a run, from taking the run
	// to answering, suspending or handing off.
	InterceptAgent(next AgentFunc) AgentFunc
	// InterceptModel wraps each model call, once per model tried (an
	// agent's fallbacks are separate calls).
	InterceptModel(next ModelFunc) ModelFunc
	// InterceptTool wraps each tool call the run itself would execute: a
	// server tool of any kind, and every handoff call (client tools are
	// the client's, and unknown names are refused before any chain).
	InterceptTool(next ToolFunc) ToolFunc
}

// RunFunc runs a run; see Interceptor.InterceptRun.
type RunFunc func(ctx context.Context, run *RunInfo) (*Result, error)

// AgentFunc runs one agent's part of a run; see Interceptor.InterceptAgent.
type AgentFunc func(ctx context.Context, call *AgentCall) error

// ModelFunc makes one model call; see Interceptor.InterceptModel.
type ModelFunc func(ctx context.Context, call *ModelCall) (*ChatResponse, error)

// ToolFunc runs one tool or handoff call; see Interceptor.InterceptTool. The
// error is for what must end the run (the client went away, a store that
// cannot record a decision); a tool that fails is a ToolResult with a Code.
type ToolFunc func(ctx context.Context, call *ToolInvocation) (ToolResult, error)

// BaseInterceptor passes every call on unchanged. Embed it in an
// Interceptor that only needs some of the methods.
type BaseInterceptor struct{}

// InterceptRun returns next.
func (BaseInterceptor) InterceptRun(next RunFunc) RunFunc { return next }

// InterceptAgent returns next.
func (BaseInterceptor) InterceptAgent(next AgentFunc) AgentFunc { return next }

// InterceptModel returns next.
func (BaseInterceptor) InterceptModel(next ModelFunc) ModelFunc { return next }

// InterceptTool returns next.
func (BaseInterceptor) InterceptTool(next ToolFunc) ToolFunc { return next }

// RunInfo describes a run to its interceptors. It is the same value for
// every call of the run; interceptors keep per-run state with SetValue.
type RunInfo struct {
	Graph *graphs.Graph
	// Agent is the agent the run starts with: the session's active agent or
	// the lead, or the sub-agent of a sub-agent run.
	Agent *graphs.Agent
	// SessionID is empty for a stateless run, for a Responses store:false
	// continuation (Request.Ephemeral) and for a sub-agent's.
	SessionID string
	Principal string
	Metadata  map[string]string
	// Input is the new input the run starts with: the request's messages
	// after its last assistant message (all of them when stateless: the
	// client wrote the whole history), or the sub-agent's task.
	Input []Message
	// Stream is set when the client reads the run as a stream.
	Stream bool
	// Parent is the run that asked this sub-agent; nil for a request's run.
	Parent *RunInfo

	shared *runShared // the root run's, shared with its sub-agent runs
	rn     *run
}

// runShared is what a run shares with its sub-agent runs.
type runShared struct {
	steps  atomic.Int64 // model calls started, counted against max_steps
	values sync.Map
}

// Depth is 0 for a request's run, 1 for a sub-agent it asked, and so on.
func (ri *RunInfo) Depth() int {
	d := 0
	for p := ri.Parent; p != nil; p = p.Parent {
		d++
	}
	return d
}

// Value returns what SetValue stored under key in this run or in the run
// it belongs to (a sub-agent run shares the values of the request's run,
// so that a budget counts every model call of a request), or nil.
func (ri *RunInfo) Value(key any) any {
	v, _ := ri.shared.values.Load(key)
	return v
}

// SetValue stores v under key for the request's run and its sub-agent
// runs; use an unexported key type, as with context values. Safe for
// concurrent use.
func (ri *RunInfo) SetValue(key, v any) { ri.shared.values.Store(key, v) }

// AgentCall is one agent's part of a run.
type AgentCall struct {
	Run   *RunInfo
	Agent *graphs.Agent
	// Handoff is the handoff the agent's part ended with, set by the run
	// before its AgentFunc returns; nil when the agent answered or the run
	// suspended.
	Handoff *graphs.Handoff

	rn *run
}

// ModelCall is one model call. An interceptor may change Request (its
// Model is the one being tried) and wrap OnDelta, e.g. to hold text back
// until a check passed.
type ModelCall struct {
	Run   *RunInfo
	Agent *graphs.Agent
	// Request is shared with the run's other model calls of the turn: change
	// it for next only, and put it back.
	Request *ChatRequest
	// OnDelta receives text deltas of a streamed call; nil when the run is
	// not streamed.
	OnDelta func(text string)
	// Step is the model call's number in the run, from 1.
	Step int
}

// ToolInvocation is one tool or handoff call of a model turn. Exactly one of
// Tool and Handoff is set.
type ToolInvocation struct {
	Run   *RunInfo
	Agent *graphs.Agent
	// Call is the model's call; an interceptor may rewrite
	// Call.Function.Arguments before next, and the tool, the handoff's
	// validation and routing note then see the new arguments.
	Call    ToolCall
	Tool    *graphs.Tool
	Handoff *graphs.Handoff
	// Refusal is set when the run refuses the call whatever is decided (a
	// second handoff in one turn, a handoff enabled_when disables): the
	// call still passes the chain, so that it is traced and counted, and
	// the innermost function answers it with this error. A gate passes
	// such a call on without deciding.
	Refusal *ToolRefusal
	// Emit reports events while the call runs (a sub-agent's progress); it
	// is safe for calls that run concurrently.
	Emit func(Event)

	rn   *run
	args orderedArgs // a handoff's validated arguments, set by the run
	// argsOf is the arguments string args was read from: a gate that
	// rewrote the call's arguments has them read again.
	argsOf string
	// perm is the permission gate's decision, for the observer to count
	// and trace; nil when the gate decided nothing new (a call still
	// pending, or one refused whatever is decided).
	perm *permDecision
}

// ToolRefusal is a tool error a call is answered with (docs/handoffs.md).
type ToolRefusal struct {
	Code    string
	Message string
}

// ToolResult is what a tool or handoff call gives back.
type ToolResult struct {
	// Content is the tool message the model reads.
	Content string
	// Code is empty when the call succeeded (a handoff: accepted), else its
	// tool error code (ToolError builds Content for it).
	Code string
	// Err is why a call failed, for logs and spans; the model reads Content.
	Err error
	// Suspend, when not empty, means the call was not run and the run
	// suspends for it with this reason (e.g. "approval_required") once the
	// turn's other calls are done; Content is not written. Data goes with
	// the pending call into Result.Suspension.
	Suspend string
	Data    any
}

// ToolError returns the result of a call refused or failed with code
// (docs/handoffs.md lists the codes): the JSON text
// {"error": {"code": ..., "message": ...}} the model reads.
func ToolError(code, message string) ToolResult {
	return ToolResult{Content: toolError(code, message), Code: code}
}

// chains are a Runner's interceptor chains, built once by New.
type chains struct {
	run   RunFunc
	agent AgentFunc
	model ModelFunc
	tool  ToolFunc
}

// buildChains wraps the Runner's own functions in its interceptors, the
// first interceptor outermost.
func buildChains(ics []Interceptor) chains {
	c := chains{run: runBase, agent: agentBase, model: modelBase, tool: toolBase}
	for i := len(ics) - 1; i >= 0; i-- {
		c.run = ics[i].InterceptRun(c.run)
		c.agent = ics[i].InterceptAgent(c.agent)
		c.model = ics[i].InterceptModel(c.model)
		c.tool = ics[i].InterceptTool(c.tool)
	}
	return c
}
