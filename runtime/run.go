package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/switchboard-ai/switchboard/graphs"
)

// Options configures a Runner. Model is required; the others may be nil.
type Options struct {
	Model Model
	// Store keeps sessions; nil allows stateless runs only.
	Store Store
	// Tools runs server-side tools; nil makes every tool call fail.
	Tools ToolRunner
	// Hooks calls on_handoff webhooks; nil skips them.
	Hooks HookCaller
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
	tracer  trace.Tracer
	metrics Metrics
	log     *slog.Logger
	prompts promptCache
}

// New returns a Runner.
func New(opts Options) *Runner {
	r := &Runner{opts: opts, metrics: opts.Metrics, log: opts.Logger}
	tp := opts.TracerProvider
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	r.tracer = tp.Tracer("github.com/switchboard-ai/switchboard/runtime")
	if r.metrics == nil {
		r.metrics = nopMetrics{}
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	return r
}

// ForgetSession drops what the Runner remembers of a session (how its
// history reads; see promptCache): call it when the session is deleted.
func (r *Runner) ForgetSession(key SessionKey) {
	r.prompts.forget(key)
}

// Request is one run to make.
type Request struct {
	Graph *graphs.Graph
	// Messages are the request's messages; the gateway has cleared any
	// handoff marker a client tried to send.
	Messages []Message
	// ClientTools are the request's own tools (CONTRACT §3.2).
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
	// the run's first model call (CONTRACT §3.2); nil when it gave none.
	ToolChoice json.RawMessage
	// At, when set, continues the session only from this point: a session
	// that has moved past it fails the run with ErrMoved before anything
	// runs, and the caller may fork from the point instead (Fork).
	At *Point
}

// run is the state of one Run.
type run struct {
	*Runner
	req   *Request
	emit  func(Event)
	graph *graphs.Graph
	agent *graphs.Agent
	offer []ToolDef // tools offered to the current agent

	choice toolChoice // the request's tool_choice, checked

	// The run's messages are history followed by transcript. history is
	// the session as loaded, shared with the store and read only; the run
	// appends to transcript alone, so a turn of a long session never copies
	// what came before it.
	history    []Message
	histScan   promptScan // how history reads for a prompt
	transcript []Message
	saved      int  // transcript[:saved] is in the store, after history
	replace    bool // the next save rewrites the whole session with transcript

	steps, handoffs int
	usage           Usage
	external        time.Duration // spent in providers, tools and hooks

	session  bool
	key      SessionKey
	lease    Lease
	version  int64
	released bool // the last save gave the lock back

	agentCtx  context.Context
	agentSpan trace.Span
}

// Run runs a graph for one request, calling emit (when not nil) with each
// event as it happens, on the calling goroutine. It returns the final result,
// or an error wrapping one of the package's sentinel errors or ctx's error.
func (r *Runner) Run(ctx context.Context, req *Request, emit func(Event)) (res *Result, err error) {
	if emit == nil {
		emit = func(Event) {}
	}
	rn := &run{Runner: r, req: req, emit: emit, graph: req.Graph}
	if req.SessionID == "" {
		rn.histScan = newPromptScan()
		rn.transcript = req.Messages
		rn.agent = req.Graph.Lead
		if err := rn.checkClientTools(); err != nil {
			return nil, err
		}
		return rn.loop(ctx)
	}
	if r.opts.Store == nil {
		return nil, fmt.Errorf("%w: sessions are not configured", ErrInvalidRequest)
	}
	return rn.inSession(ctx)
}

// inSession runs under the session's lock, renewed while the run lasts.
func (rn *run) inSession(ctx context.Context) (*Result, error) {
	input := newInput(rn.req.Messages)
	if len(input) == 0 {
		return nil, fmt.Errorf("%w: a session request needs new input after its last assistant message", ErrInvalidRequest)
	}
	rn.session = true
	rn.key = SessionKey{Principal: rn.req.Principal, ID: rn.req.SessionID}
	sess, lease, err := rn.acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("acquire session: %w", err)
	}
	rn.lease, rn.version = lease, sess.Version
	if at := rn.req.At; at != nil && at.Version != sess.Version {
		_ = rn.opts.Store.Release(context.WithoutCancel(ctx), rn.key, lease)
		return nil, fmt.Errorf("continue session at version %d, now %d: %w", at.Version, sess.Version, ErrMoved)
	}
	defer func() {
		if rn.released {
			return // the last save released the lock in its own round trip
		}
		// The lock goes back even when the client has gone away.
		if err := rn.opts.Store.Release(context.WithoutCancel(ctx), rn.key, lease); err != nil {
			rn.log.Warn("release session", "session", rn.key.ID, "err", err)
		}
	}()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := rn.keepLease(ctx, cancel)
	defer stop()

	rn.history = sess.Messages
	rn.histScan = rn.prompts.history(rn.key, rn.history)
	rn.transcript = append(make([]Message, 0, len(input)+8), input...)
	rn.agent = activeAgent(rn.graph, rn.histScan.marker)
	if err := rn.checkClientTools(); err != nil {
		return nil, err
	}
	res, err := rn.loop(ctx)
	// Once the last save released the lock a renewal finds it gone and
	// cancels ctx; the run had already ended with its work stored.
	if !rn.released && errors.Is(context.Cause(ctx), ErrLeaseLost) {
		return nil, fmt.Errorf("run stopped: %w", ErrLeaseLost)
	}
	return res, err
}

// busyGrace is how long a request waits for a session's lock before it is
// answered 409: long enough to cover a run that is just finishing (a client
// that aborts a stream and sends its next turn at once races the aborted
// run's release), short next to any real run.
const busyGrace = 250 * time.Millisecond

// acquire takes the session's lock, trying again for up to busyGrace while
// another run holds it.
func (rn *run) acquire(ctx context.Context) (*Session, Lease, error) {
	deadline := time.Now().Add(busyGrace)
	for {
		sess, lease, err := rn.opts.Store.Acquire(ctx, rn.key)
		if !errors.Is(err, ErrBusy) || time.Now().After(deadline) {
			return sess, lease, err
		}
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, Lease{}, ctx.Err()
		case <-t.C:
		}
	}
}

// newInput returns the messages after the last assistant message, all of
// them when there is none: clients may resend the whole history or send only
// the new turn.
func newInput(msgs []Message) []Message {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == RoleAssistant {
			return msgs[i+1:]
		}
	}
	return msgs
}

// activeAgent is the agent a session's last handoff marker names (its
// `to`, CONTRACT §4.1), or the lead when there is none or that agent is not
// in the graph.
func activeAgent(g *graphs.Graph, marker string) *graphs.Agent {
	if a, ok := g.Agents[marker]; ok {
		return a
	}
	return g.Lead
}

// checkClientTools rejects a client tool named like a tool or handoff of the
// active agent (the call could not be told apart), and a tool_choice the
// agent cannot honour.
func (rn *run) checkClientTools() error {
	for _, t := range rn.req.ClientTools {
		if rn.agentTool(rn.agent, t.Name) != nil || agentHandoff(rn.agent, t.Name) != nil {
			return fmt.Errorf("%w: client tool %q clashes with a tool or handoff of agent %q", ErrInvalidRequest, t.Name, rn.agent.Name)
		}
	}
	return rn.checkToolChoice()
}

// loop runs model turns until an agent answers, a client tool is called or
// a limit is hit.
func (rn *run) loop(ctx context.Context) (res *Result, err error) {
	rn.startAgent(ctx, rn.agent)
	defer func() { rn.endAgent(err) }()

	out, err := rn.resume(rn.agentCtx)
	if err != nil {
		return nil, err
	}
	for {
		if out.clientCalls != nil {
			return rn.finish(ctx, out.message, "tool_calls")
		}
		if out.handoff != nil {
			rn.switchAgent(ctx, out.handoff)
		}
		if rn.steps >= rn.graph.MaxSteps {
			return nil, fmt.Errorf("%w: the run would need model call %d (max_steps %d)", ErrMaxSteps, rn.steps+1, rn.graph.MaxSteps)
		}
		rn.steps++
		resp, err := rn.callModel(rn.agentCtx)
		if err != nil {
			return nil, err
		}
		rn.usage.Add(resp.Usage)
		msg := resp.Message
		msg.Role = RoleAssistant
		msg.Handoff = nil
		nameCalls(msg.ToolCalls, rn.steps)
		rn.transcript = append(rn.transcript, msg)
		if len(msg.ToolCalls) == 0 {
			return rn.finish(ctx, msg, resp.FinishReason)
		}
		if out, err = rn.turn(rn.agentCtx, msg.ToolCalls); err != nil {
			return nil, err
		}
		if out.handoff != nil {
			// Switch before saving: the step's save records the agent that
			// now holds the conversation.
			rn.switchAgent(ctx, out.handoff)
			out.handoff = nil
		}
		if out.clientCalls == nil {
			if err := rn.save(ctx, false); err != nil {
				return nil, err
			}
		}
	}
}

// finish saves the last step, giving the session's lock back in the same
// round trip, and builds the result.
func (rn *run) finish(ctx context.Context, msg Message, reason string) (*Result, error) {
	if err := rn.save(ctx, true); err != nil {
		return nil, err
	}
	if reason == "" {
		reason = "stop"
	}
	var at Point
	if rn.session {
		at = pointAfter(rn.history, rn.transcript, rn.version, rn.agent.Name)
	}
	return &Result{
		Point:        at,
		Agent:        rn.agent.Name,
		Message:      msg,
		FinishReason: reason,
		Usage:        rn.usage,
		Version:      rn.version,
		ExternalTime: rn.external,
	}, nil
}

// save writes what the run added since the last save, as one step. The
// run's last save (last set) has the store release the lock with the write,
// which saves a round trip to it; when there is nothing to write, or the
// write fails, the lock stays for inSession to release.
func (rn *run) save(ctx context.Context, last bool) error {
	if !rn.session {
		return nil
	}
	w := Write{ActiveAgent: rn.agent.Name, Replace: rn.replace, Messages: rn.transcript, Release: last}
	if !rn.replace {
		w.Messages = rn.transcript[rn.saved:]
	}
	if len(w.Messages) == 0 && !w.Replace {
		return nil
	}
	v, err := rn.opts.Store.Save(ctx, rn.key, rn.lease, w)
	if err != nil {
		return fmt.Errorf("save session: %w", err)
	}
	rn.version, rn.saved, rn.replace, rn.released = v, len(rn.transcript), false, last
	return nil
}

// messages returns the run's whole transcript, history first; it copies
// when there is history, which only input filters need.
func (rn *run) messages() []Message {
	if len(rn.history) == 0 {
		return rn.transcript
	}
	return append(slices.Clip(rn.history), rn.transcript...)
}

// nameCalls gives an id to every tool call that came without one (some
// local models omit them): results are matched to calls by id.
func nameCalls(calls []ToolCall, step int) {
	for i := range calls {
		if calls[i].ID == "" {
			calls[i].ID = "call_sb_" + strconv.Itoa(step) + "_" + strconv.Itoa(i)
		}
		if calls[i].Type == "" {
			calls[i].Type = "function"
		}
	}
}

// nopMetrics records nothing.
type nopMetrics struct{}

func (nopMetrics) Handoff(string, string, string, string)         {}
func (nopMetrics) ModelCall(string, string, float64, Usage, bool) {}
func (nopMetrics) ToolCall(string, float64, bool)                 {}
