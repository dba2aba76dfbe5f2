// Package guardrails checks a run's input and what its agents say
// (README, Guardrails), as a runtime.Interceptor: input guardrails run alongside
// an agent's first model call and gate everything that call produced;
// output guardrails judge each assistant text before the client sees it,
// holding a streamed agent's deltas until they passed. A guardrail that
// trips halts the run (runtime.Halt) with a content_filter answer, and a
// run with guardrails saves its steps only at its end, so a tripped run
// leaves its session as it was.
//
// The judges are behind the Judge interface: Regex and Model live here
// (Model over runtime.Model, so no provider SDK), the webhook judge in
// package webhooks; internal/app wires them by kind.
package guardrails

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/runtime"
)

// FinishReason is the finish_reason of a run a guardrail stopped.
const FinishReason = "content_filter"

// Metrics counts checks; telemetry.Metrics satisfies it.
type Metrics interface {
	// GuardrailCheck counts one check; outcome is passed, tripped or
	// failed (the judge errored, whatever fail_open then decided).
	GuardrailCheck(guardrail, stage, outcome string)
}

// Options configure an Interceptor.
type Options struct {
	// Judge judges every check; a Judges dispatches them by kind.
	Judge Judge
	// TracerProvider traces each check as a span "guardrail <name>"; nil
	// traces nothing.
	TracerProvider trace.TracerProvider
	// Metrics counts checks; nil counts nothing.
	Metrics Metrics
	Logger  *slog.Logger
}

// Interceptor runs the guardrails of graphs and agents around a run's
// agents and model calls.
type Interceptor struct {
	runtime.BaseInterceptor
	judge   Judge
	tracer  trace.Tracer
	metrics Metrics
	log     *slog.Logger
}

var _ runtime.Interceptor = (*Interceptor)(nil)

// New returns an Interceptor.
func New(opts Options) *Interceptor {
	tp := opts.TracerProvider
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	ic := &Interceptor{judge: opts.Judge, tracer: tp.Tracer("github.com/switchboard-ai/switchboard/guardrails"), metrics: opts.Metrics, log: opts.Logger}
	if ic.log == nil {
		ic.log = slog.New(slog.DiscardHandler)
	}
	return ic
}

// stateKey keys a run's runState in its RunInfo.
type stateKey struct{}

// runState is what the guardrails remember of one request's run. Agents
// and their model calls follow one another, so only the checks' own
// goroutines run beside the loop, and they touch their pending set alone.
type runState struct {
	input     string // the run's new user input
	graphDone bool   // the graph's input guardrails were queued
	checked   map[string]bool
	// queue are input guardrails waiting for the next model call.
	queue []*graphs.Guardrail
}

// state returns the run's state, or nil when the guardrails leave the
// call alone (a sub-agent's run, a graph without guardrails).
func state(ri *runtime.RunInfo) *runState {
	if ri.Parent != nil {
		return nil
	}
	st, _ := ri.Value(stateKey{}).(*runState)
	return st
}

// InterceptRun sets up the run's state and has a guarded run save only at
// its end. A sub-agent's run is not checked: its text is a tool result the
// client does not see, and its input is its parent's model's.
func (ic *Interceptor) InterceptRun(next runtime.RunFunc) runtime.RunFunc {
	return func(ctx context.Context, run *runtime.RunInfo) (*runtime.Result, error) {
		if run.Parent != nil || !run.Graph.HasGuardrails() {
			return next(ctx, run)
		}
		run.SaveAtEnd()
		run.SetValue(stateKey{}, &runState{input: InputText(run.Input), checked: map[string]bool{}})
		run.SetSubagentCheck(ic.checkSubagent)
		run.SetPauseCheck(ic.checkPause)
		return next(ctx, run)
	}
}

// InterceptAgent queues the input guardrails the agent taking the run
// adds: the graph's and the first agent's, then a handoff target's own,
// each agent's once per run.
func (ic *Interceptor) InterceptAgent(next runtime.AgentFunc) runtime.AgentFunc {
	return func(ctx context.Context, call *runtime.AgentCall) error {
		st := state(call.Run)
		if st == nil || st.input == "" {
			return next(ctx, call)
		}
		if !st.graphDone {
			st.graphDone = true
			st.queue = append(st.queue, call.Run.Graph.InputGuardrails...)
		}
		if !st.checked[call.Agent.Name] {
			st.checked[call.Agent.Name] = true
			st.queue = append(st.queue, call.Agent.InputGuardrails...)
		}
		return next(ctx, call)
	}
}

// InterceptModel runs queued input guardrails alongside the call, holds
// what the call produced until they passed (cancelling it when one
// trips), then judges the call's text with the output guardrails, holding
// the streamed text of an agent that has some until they passed.
func (ic *Interceptor) InterceptModel(next runtime.ModelFunc) runtime.ModelFunc {
	return func(ctx context.Context, call *runtime.ModelCall) (*runtime.ChatResponse, error) {
		// An unguarded call goes through a small frame: a stream is read
		// from under it for as long as it lasts (issue 22).
		st := state(call.Run)
		if st == nil {
			return next(ctx, call)
		}
		return ic.guardModel(ctx, call, st, next)
	}
}

// guardModel is InterceptModel for a call of a guarded run.
func (ic *Interceptor) guardModel(ctx context.Context, call *runtime.ModelCall, st *runState, next runtime.ModelFunc) (*runtime.ChatResponse, error) {
	output := outputGuardrails(call.Run.Graph, call.Agent)
	var in *pending
	if len(st.queue) > 0 {
		in = ic.start(ctx, call.Run, call.Agent, StageInput, st.input, st.queue)
	}
	if in == nil && len(output) == 0 {
		return next(ctx, call)
	}
	mctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if in != nil {
		go func() {
			select {
			case <-in.tripped:
				cancel()
			case <-mctx.Done():
			}
		}()
	}
	h := &holder{out: call.OnDelta, in: in, all: len(output) > 0}
	if call.OnDelta != nil {
		call.OnDelta = h.delta
		defer func() { call.OnDelta = h.out }()
	}
	resp, err := next(mctx, call)
	if in != nil {
		if err := in.wait(ctx); err != nil {
			return nil, spent(err, resp)
		}
		// Passed: a fallback call of this step, or the next step, is
		// not checked again.
		st.queue = nil
	}
	if err != nil {
		return nil, err
	}
	if text := resp.Message.Content; text != "" && len(output) > 0 {
		if err := ic.start(ctx, call.Run, call.Agent, StageOutput, text, output).wait(ctx); err != nil {
			return nil, spent(err, resp)
		}
	}
	h.flush()
	return resp, nil
}

// spent gives a trip the usage of the model call it stopped, when that
// call answered: its tokens were spent all the same.
func spent(err error, resp *runtime.ChatResponse) error {
	if h := (*runtime.Halt)(nil); resp != nil && errors.As(err, &h) {
		h.CallUsage = resp.Usage
	}
	return err
}

// checkSubagent judges the text a sub-agent call streamed to the client
// (runtime.SubagentCheck) with the output guardrails of the graph, of the
// calling agent and of the sub-agent, the agent speaking: a sub-agent's
// run is not checked as a run (its answer is a tool result), but on a
// stream its text is delivered as it goes (CONTRACT §7, §8).
func (ic *Interceptor) checkSubagent(ctx context.Context, call *runtime.ToolInvocation, text string) error {
	output := outputGuardrails(call.Run.Graph, call.Agent)
	if t := call.Tool; t != nil && t.Agent != nil && t.Agent.Agent != nil {
		for _, g := range t.Agent.Agent.OutputGuardrails {
			if !slices.Contains(output, g) {
				output = append(slices.Clip(output), g)
			}
		}
	}
	if len(output) == 0 {
		return nil
	}
	return ic.start(ctx, call.Run, call.Agent, StageOutput, text, output).wait(ctx)
}

// checkPause judges the text a paused run shows the client, its pending
// calls' tools and arguments (runtime.PauseCheck), with the output
// guardrails of the graph and of the agent that paused.
func (ic *Interceptor) checkPause(ctx context.Context, run *runtime.RunInfo, agent *graphs.Agent, text string) error {
	output := outputGuardrails(run.Graph, agent)
	if len(output) == 0 {
		return nil
	}
	return ic.start(ctx, run, agent, StageOutput, text, output).wait(ctx)
}

// outputGuardrails are the graph's then the agent's output guardrails.
func outputGuardrails(g *graphs.Graph, a *graphs.Agent) []*graphs.Guardrail {
	if len(a.OutputGuardrails) == 0 {
		return g.OutputGuardrails
	}
	if len(g.OutputGuardrails) == 0 {
		return a.OutputGuardrails
	}
	return append(append(make([]*graphs.Guardrail, 0, len(g.OutputGuardrails)+len(a.OutputGuardrails)), g.OutputGuardrails...), a.OutputGuardrails...)
}

// holder stands between a streamed call and the client: it holds the
// deltas while input checks are pending, or for the whole call when all
// is set (the agent has output guardrails). The model calls delta from
// one goroutine, and flush after it returned, so holder needs no lock.
type holder struct {
	out func(string)
	in  *pending
	all bool
	buf strings.Builder
}

func (h *holder) delta(text string) {
	if h.all || (h.in != nil && !h.in.passed()) {
		h.buf.WriteString(text)
		return
	}
	h.flush()
	h.out(text)
}

// flush releases what was held.
func (h *holder) flush() {
	if h.out != nil && h.buf.Len() > 0 {
		h.out(h.buf.String())
		h.buf.Reset()
	}
}

// InputText is what input guardrails check: the text of the new user
// messages, joined by blank lines.
func InputText(input []runtime.Message) string {
	var parts []string
	for _, m := range input {
		if m.Role == runtime.RoleUser && m.Content != "" {
			parts = append(parts, m.Content)
		}
	}
	return strings.Join(parts, "\n\n")
}

// pending is a set of checks running at once.
type pending struct {
	// results holds, per guardrail, nil when it passed, else its
	// *runtime.Halt or the run's error (check).
	results []error
	tripped chan struct{} // closed at the first trip or error
	done    chan struct{} // closed when every check ended
	once    sync.Once
}

// passed reports, without waiting, whether every check ended and passed.
func (p *pending) passed() bool {
	select {
	case <-p.done:
		return p.trip() == nil
	default:
		return false
	}
}

// trip is the first guardrail, in the order of the lists, that tripped
// (or could not run for the run's budget); call it once done is closed.
func (p *pending) trip() error {
	for _, err := range p.results {
		if err != nil {
			return err
		}
	}
	return nil
}

// wait waits for every check and returns the trip as a *runtime.Halt, if
// any (or the run's error), or ctx's error when ctx ends first.
func (p *pending) wait(ctx context.Context) error {
	select {
	case <-p.done:
		return p.trip()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// start runs the checks of text by guardrails, each in a goroutine of its
// own.
func (ic *Interceptor) start(ctx context.Context, run *runtime.RunInfo, agent *graphs.Agent, stage, text string, list []*graphs.Guardrail) *pending {
	p := &pending{results: make([]error, len(list)), tripped: make(chan struct{}), done: make(chan struct{})}
	var wg sync.WaitGroup
	for i, g := range list {
		c := &Check{Guardrail: g, Stage: stage, Text: text, Agent: agent.Name, Graph: run.Graph.Name,
			SessionID: run.SessionID, Principal: run.Principal, Run: run, On: agent}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := ic.check(ctx, c); err != nil {
				p.results[i] = err
				p.once.Do(func() { close(p.tripped) })
			}
		}()
	}
	go func() {
		wg.Wait()
		close(p.done)
	}()
	return p
}
