package runtime

import (
	"context"
	"errors"
	"time"

	"github.com/switchboard-ai/switchboard/graphs"
)

// callModel makes the current agent's next model call: its model, then its
// fallbacks in order while a call fails before any text reached the client.
// Each model tried is one call through the model chain. A stream is read
// from under it, so it keeps a small frame (see agentBase).
func (rn *run) callModel(ctx context.Context, step int) (*ChatResponse, error) {
	if err := rn.prepareModelCall(ctx, step); err != nil {
		return nil, err
	}
	var err error
	for _, ref := range rn.agent.Models {
		rn.model.Request.Model = ref
		start := time.Now()
		var resp *ChatResponse
		resp, err = rn.chains.model(rn.pauseContext(ctx), &rn.model)
		rn.Pause()
		rn.external += time.Since(start)
		if err == nil {
			return resp, nil
		}
		if ctx.Err() != nil || rn.streamed || !(errors.Is(err, ErrUpstream) || errors.Is(err, ErrUpstreamTimeout)) {
			break
		}
		rn.modelFailed(ref, err)
	}
	return nil, err
}

// prepareModelCall sets rn.model up for the step's call.
func (rn *run) prepareModelCall(ctx context.Context, step int) error {
	instructions, err := rn.instructions(ctx)
	if err != nil {
		return err
	}
	req := &ChatRequest{
		Messages: rn.histScan.promptWith(instructions, rn.history, rn.transcript),
		Tools:    rn.offered(),
		Params:   paramsFor(rn.agent, rn.req.Params),
		Stream:   rn.req.Stream,
	}
	req.ToolChoice = rn.choiceFor(req.Tools, step)
	rn.streamed = false
	var onDelta func(string)
	if rn.req.Stream {
		onDelta = rn.deltaFor(rn.agent.Name, step)
	}
	rn.model = ModelCall{Run: &rn.info, Agent: rn.agent, Request: req, OnDelta: onDelta, Step: step}
	return nil
}

// deltaFor returns the OnDelta of a streamed call of agent, the run's
// model call step: each text delta is an event.
func (rn *run) deltaFor(agent string, step int) func(string) {
	return func(text string) {
		rn.streamed = true
		rn.batched = rn.batched || rn.pauser
		rn.emit(Event{Kind: EventDelta, Agent: agent, Text: text, Step: step, Batched: rn.pauser})
	}
}

// modelFailed logs a model call that failed and is tried at a fallback.
func (rn *run) modelFailed(ref graphs.ModelRef, err error) {
	rn.log.Warn("model call failed", "agent", rn.agent.Name, "model", ref.String(), "err", err)
}

// modelBase is the innermost ModelFunc: the call to the Model. The run's
// usage and its token budget count every answer here, where the call was
// made, and not where the answer is taken: an interceptor may end the run
// on it (a guardrail that trips on the text), and the reply's usage still
// sums every model call of the run (CONTRACT §3); a guardrail's judge of
// the answer is a model call the budget must already see it in (§8).
func modelBase(ctx context.Context, call *ModelCall) (*ChatResponse, error) {
	resp, err := call.Run.rn.opts.Model.Chat(ctx, call.Request, call.OnDelta)
	if resp != nil {
		call.Run.charge(resp.Usage)
	}
	return resp, err
}

// offered lists the tools offered to the current agent: its own tools, its
// enabled handoffs, then the client's tools that do not clash with them.
func (rn *run) offered() []ToolDef {
	if rn.offer != nil {
		return rn.offer
	}
	a := rn.agent
	tools := rn.agentTools()
	out := make([]ToolDef, 0, len(tools)+len(a.Handoffs)+len(rn.req.ClientTools))
	for _, t := range tools {
		out = append(out, ToolDef{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
	}
	for _, t := range rn.memoryTools() {
		out = append(out, ToolDef{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
	}
	if !rn.noHandoffs {
		for _, h := range a.Handoffs {
			if h.EnabledWhen.Holds(rn.req.Metadata, rn.req.Principal) {
				out = append(out, ToolDef{Name: h.ToolName, Description: h.Description, Parameters: h.Parameters})
			}
		}
	}
	for _, t := range rn.req.ClientTools {
		// After a handoff the target's own names win over the client's.
		if rn.serverTool(t.Name) == nil && agentHandoff(a, t.Name) == nil && rn.memoryTool(t.Name) == nil {
			out = append(out, t)
		}
	}
	rn.offer = out
	return out
}
