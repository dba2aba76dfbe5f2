package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/switchboard-ai/switchboard/graphs"
)

// Options configures a Runner. Model is required; the others may be nil.
type Options struct {
	Model Model
	// Store keeps sessions; nil allows stateless runs only.
	Store Store
	// Tools runs server-side tools; nil makes every tool call fail. A
	// ToolKinds dispatches each call to the runner of its tool's kind.
	Tools ToolRunner
	// ToolSource adds the tools an agent is offered that exist only at run
	// time (an MCP server's, once listed); nil: the configured ones only.
	ToolSource ToolSource
	// Hooks calls on_handoff and on_approval_required webhooks; nil skips
	// them.
	Hooks HookCaller
	// PreToolCall asks graphs' pre_tool_call hooks; nil denies every call
	// of a graph that has one (fail closed).
	PreToolCall PreToolCallHook
	// Memory keeps memory slots' facts for the <memory> blocks of system
	// prompts; nil offers no memory slot. Their tools are run by Tools:
	// register MemoryTools for graphs.ToolMemory.
	Memory MemoryStore
	// Interceptors wrap every run, agent, model and tool call, the first
	// outermost (see Interceptor). None costs nothing.
	Interceptors []Interceptor
	// TracerProvider traces runs; nil traces nothing.
	TracerProvider trace.TracerProvider
	Metrics        Metrics
	Logger         *slog.Logger
	// CaptureContent records prompts and completions on spans.
	CaptureContent bool
}

// Runner runs graphs. It is safe for concurrent use.
type Runner struct {
	opts    Options
	log     *slog.Logger
	chains  chains
	obs     *observer
	prompts promptCache
	metrics Metrics // never nil
	// notifying counts on_approval_required calls in flight (Wait);
	// stopNotify cancels them.
	notifying  sync.WaitGroup
	notifyMu   sync.Mutex // guards notifyDone against notifying.Add
	notifyDone bool       // Wait has begun: no call starts any more
	notifyStop context.Context
	stopNotify context.CancelFunc
}

// New returns a Runner.
func New(opts Options) *Runner {
	r := &Runner{opts: opts, log: opts.Logger}
	r.notifyStop, r.stopNotify = context.WithCancel(context.Background())
	tp := opts.TracerProvider
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	obs := &observer{
		tracer:         tp.Tracer("github.com/switchboard-ai/switchboard/runtime"),
		metrics:        opts.Metrics,
		log:            r.log,
		captureContent: opts.CaptureContent,
		quiet:          TracingOff(tp),
	}
	if obs.metrics == nil {
		obs.metrics = nopMetrics{}
	}
	// The budget is outside the spans: a call it refuses never starts. The
	// permission gate is inside them, so that a decision is on the call's
	// span.
	r.metrics, r.obs = obs.metrics, obs
	r.chains = buildChains(append([]Interceptor{budget{}, obs, permissionGate{tracer: obs.tracer}}, opts.Interceptors...))
	return r
}

// Request is one run to make.
type Request struct {
	Graph *graphs.Graph
	// Messages are the request's messages; the gateway has cleared any
	// handoff marker a client tried to send.
	Messages []Message
	// ClientTools are the request's own tools (docs/http-api.md).
	ClientTools []ToolDef
	// Metadata is the request's metadata, for enabled_when.
	Metadata  map[string]string
	Principal string
	// SessionID selects the session; empty runs stateless.
	SessionID string
	// Stream makes provider calls streamed and emits text deltas.
	Stream bool
	Params *Params
	// ToolChoice is the request's tool_choice as the client wrote it, for
	// the run's first model call (docs/http-api.md); nil when it gave none.
	ToolChoice json.RawMessage
	// Approvals are decisions the request brings for the session's
	// pending approvals (docs/permissions.md).
	Approvals []Decision
	// Ephemeral marks a session that is forgotten once the run ends (a
	// Responses store:false continuation): nobody could resume a pause,
	// so the gate denies `ask` as it does without a session.
	Ephemeral bool
	// At, when set, continues the session only from this point: a session
	// that has moved past it fails the run with ErrMoved before anything
	// runs, and the caller may fork from the point instead (Fork).
	At *Point
}

// Run runs a graph for one request, calling emit (when not nil) with each
// event as it happens, on the calling goroutine (or, while tools run
// concurrently, on one of theirs, never two at once). It returns the final
// result, or an error wrapping one of the package's sentinel errors or
// ctx's error.
//
// With a session id the run is wrapped in the session's lifecycle
// (session.go): loaded and locked, saved after every step, released at the
// end. Without one the request's messages are the transcript.
func (r *Runner) Run(ctx context.Context, req *Request, emit func(Event)) (*Result, error) {
	if emit == nil {
		return r.RunTo(ctx, req, nil)
	}
	return r.RunTo(ctx, req, EmitFunc(emit))
}

// RunTo is Run with the run's events sent to sink (nil: dropped). A
// renderer that is a Sink itself spares each event a function object of its
// own, which a stream that waited for its next chunk found gone cold at
// every delta (issue 22).
func (r *Runner) RunTo(ctx context.Context, req *Request, sink Sink) (*Result, error) {
	if sink == nil {
		sink = dropEvents{}
	}
	if req.SessionID == "" {
		rn, err := r.openStateless(req, sink)
		if err != nil {
			return nil, err
		}
		res, err := rn.start(ctx)
		return res, rn.failed(err)
	}
	if r.opts.Store == nil {
		return nil, fmt.Errorf("%w: sessions are not configured", ErrInvalidRequest)
	}
	return r.runSession(ctx, req, sink)
}

// openStateless sets up the run of a request outside any session. It is
// not inlined in RunTo, which is on the stack for as long as a stream lasts
// (runSession).
//
//go:noinline
func (r *Runner) openStateless(req *Request, sink Sink) (*run, error) {
	if len(req.Approvals) > 0 {
		// Approvals live in sessions: a stateless request has none to decide.
		return nil, fmt.Errorf("approval %s: %w (the request has no session)", req.Approvals[0].ID, ErrApprovalNotFound)
	}
	if err := checkResults(nil, req.Messages, 0); err != nil {
		return nil, err
	}
	rn := r.newRun(req, sink, nil)
	rn.transcript = req.Messages
	rn.agent = req.Graph.Lead
	// Every message: a stateless client writes the whole history itself,
	// assistant messages included, and all of it reaches the provider, so
	// the input guardrails judge all of it (a text placed before a made-up
	// assistant message would otherwise reach the model unjudged).
	rn.info.Input = req.Messages
	if err := rn.checkClientTools(); err != nil {
		return nil, err
	}
	if err := rn.checkOwed(req.Messages, len(req.Messages)-lastAssistant(req.Messages)-1); err != nil {
		return nil, err
	}
	return rn, nil
}

// AgentRequest is a run of one agent over a transcript of its own, outside
// any session: what a sub-agent tool needs.
type AgentRequest struct {
	// Parent is the run that asks; the sub-agent's model calls count
	// against its max_steps and it shares its RunInfo values.
	Parent *RunInfo
	Graph  *graphs.Graph
	Agent  *graphs.Agent
	// Messages are the new transcript, e.g. one user message: the task.
	Messages []Message
	// Handoffs offers the agent its handoffs; a sub-agent has none.
	Handoffs bool
	Stream   bool
	Params   *Params
	// within is the id of the caller's call that runs the sub-agent.
	within string
}

// RunAgent runs an agent until it answers (or a limit is hit) and returns
// its result; the text is Result.Message.Content. Its events go to emit
// (nil: dropped): a sub-agent tool reports them as its own.
func (r *Runner) RunAgent(ctx context.Context, req *AgentRequest, emit func(Event)) (*Result, error) {
	var sink Sink = dropEvents{}
	if emit != nil {
		sink = EmitFunc(emit)
	}
	rreq := &Request{Graph: req.Graph, Messages: req.Messages, Stream: req.Stream, Params: req.Params}
	if p := req.Parent; p != nil {
		rreq.Principal, rreq.Metadata = p.Principal, p.Metadata
	}
	rn := r.newRun(rreq, sink, req.Parent)
	if p := req.Parent; p != nil && p.rn != nil && req.within != "" {
		rn.nest = append(slices.Clip(p.rn.nest), req.within)
	}
	rn.noHandoffs = !req.Handoffs
	rn.transcript = req.Messages
	rn.agent = req.Agent
	rn.info.Agent, rn.info.Input = req.Agent, req.Messages
	res, err := rn.start(ctx)
	return res, rn.failed(err) // with the usage of its calls that answered
}

// newRun prepares a run's state; the caller sets its transcript and agent.
func (r *Runner) newRun(req *Request, sink Sink, parent *RunInfo) *run {
	rn := &run{Runner: r, req: req, sink: sink, graph: req.Graph, histScan: newPromptScan()}
	rn.info = RunInfo{
		Graph: req.Graph, Agent: req.Graph.Lead, SessionID: req.SessionID, Principal: req.Principal,
		Metadata: req.Metadata, Stream: req.Stream, Parent: parent, rn: rn,
	}
	if req.Ephemeral {
		// Its session is a copy forgotten once the run ends: to what the
		// run calls (hooks, memory, spans) it is a run without a session,
		// so a session-scoped memory slot is not offered, where its facts
		// would be kept under an id nobody knows (CONTRACT §9, §10).
		rn.info.SessionID = ""
	}
	rn.approvalBook = &rn.ownBook
	if parent != nil {
		rn.info.shared = parent.shared
		if parent.rn != nil {
			// A call deep in the sub-agent waits in the session's run.
			rn.approvalBook = parent.rn.approvalBook
		}
	} else {
		rn.info.shared = &rn.shared
	}
	return rn
}
