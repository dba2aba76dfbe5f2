package guardrails

import (
	"context"
	"strings"
	"sync"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/runtime"
)

// A sub-agent's run is not checked (its answer is a tool result), but on
// a stream its text reaches the client as it goes, in subagent_delta
// chunks (CONTRACT §8): text the gateway delivers, which output
// guardrails check before the client sees it (§7). So the chunks of a
// sub-agent call are held, in order, until the call ended and its text
// passed the output guardrails of the graph and of the calling agent.

// InterceptTool holds and checks the streamed work of a sub-agent call.
func (ic *Interceptor) InterceptTool(next runtime.ToolFunc) runtime.ToolFunc {
	return func(ctx context.Context, inv *runtime.ToolInvocation) (runtime.ToolResult, error) {
		st := state(inv.Run)
		if st == nil || !inv.Run.Stream || inv.Tool == nil || inv.Tool.Agent == nil || inv.Emit == nil {
			return next(ctx, inv)
		}
		output := outputGuardrails(inv.Run.Graph, inv.Agent)
		if len(output) == 0 {
			return next(ctx, inv)
		}
		return ic.guardSubagent(ctx, inv, output, next)
	}
}

// guardSubagent runs a sub-agent call with its events held, then checks
// the text they carry; they are released only when it passed.
func (ic *Interceptor) guardSubagent(ctx context.Context, inv *runtime.ToolInvocation, output []*graphs.Guardrail, next runtime.ToolFunc) (runtime.ToolResult, error) {
	var mu sync.Mutex
	var held []runtime.Event
	var text strings.Builder
	emit := inv.Emit
	inv.Emit = func(ev runtime.Event) {
		mu.Lock()
		defer mu.Unlock()
		held = append(held, ev)
		if ev.Kind == runtime.EventSubagentDelta {
			text.WriteString(ev.Text)
		}
	}
	res, err := next(ctx, inv)
	inv.Emit = emit
	mu.Lock()
	defer mu.Unlock()
	if t := text.String(); t != "" && ctx.Err() == nil {
		if terr := ic.start(ctx, inv.Run, inv.Agent, StageOutput, t, output).wait(ctx); terr != nil {
			return runtime.ToolResult{}, terr
		}
	}
	for _, ev := range held {
		emit(ev)
	}
	return res, err
}
