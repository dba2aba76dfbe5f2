package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/switchboard-ai/switchboard/graphs"
)

// ErrBudgetExceeded: the run's tokens reached the graph's
// max_tokens_per_run and it needs one more model call.
var ErrBudgetExceeded = errors.New("token budget exceeded")

// budget is the Interceptor of max_tokens_per_run (CONTRACT §8): it sums the
// tokens of every model call of a request's run, its sub-agents' included
// (they share the run's values), and refuses a model call once the sum has
// reached the graph's budget. Steps already finished stay saved, as with
// max_steps, because the refusal is an error of the step that needs it.
type budget struct{ BaseInterceptor }

var _ Interceptor = budget{}

// budgetKey keys a run's token counter in its shared values.
type budgetKey struct{}

// InterceptRun gives a request's run its counter; its sub-agent runs
// share it.
func (budget) InterceptRun(next RunFunc) RunFunc {
	return func(ctx context.Context, run *RunInfo) (*Result, error) {
		if run.Parent == nil && run.Graph.MaxTokensPerRun > 0 {
			run.SetValue(budgetKey{}, new(atomic.Int64))
		}
		return next(ctx, run)
	}
}

// InterceptModel refuses a call past the budget and counts each answer's
// tokens.
func (budget) InterceptModel(next ModelFunc) ModelFunc {
	return func(ctx context.Context, call *ModelCall) (*ChatResponse, error) {
		limit := call.Run.Graph.MaxTokensPerRun
		used, _ := call.Run.Value(budgetKey{}).(*atomic.Int64)
		if limit <= 0 || used == nil {
			return next(ctx, call)
		}
		if n := used.Load(); n >= limit {
			return nil, fmt.Errorf("%w: the run has used %d tokens (max_tokens_per_run %d) and needs another model call", ErrBudgetExceeded, n, limit)
		}
		resp, err := next(ctx, call)
		if resp != nil {
			used.Add(tokensOf(resp.Usage))
		}
		return resp, err
	}
}

// tokensOf is what a call's usage counts against the budget.
func tokensOf(u Usage) int64 {
	if n := int64(u.PromptTokens + u.CompletionTokens); n != 0 {
		return n
	}
	return int64(u.TotalTokens)
}

// CallModel makes a model call of the run outside its agents' turns: a
// model guardrail's judge, for agent's text. It is traced as a `chat` span
// and counted in the provider metrics as the agents' calls are (CONTRACT
// §5), and its tokens count against max_tokens_per_run (§8: "sub-agents
// and model guardrails included"), but it passes none of the
// interceptors (a guardrail would judge its own judge) and is not in the
// reply's usage. The budget does not refuse it: a guardrail that cannot
// check fails closed, and the run's next model call is refused instead.
func (ri *RunInfo) CallModel(ctx context.Context, agent *graphs.Agent, req *ChatRequest) (*ChatResponse, error) {
	rn := ri.rn
	if rn == nil {
		return nil, errors.New("runtime: CallModel needs a run's RunInfo")
	}
	call := &ModelCall{Run: ri, Agent: agent, Request: req}
	ctx, span := rn.obs.startModel(ctx, call)
	start := time.Now()
	resp, err := rn.opts.Model.Chat(ctx, req, nil)
	resp, err = rn.obs.endModel(span, call, time.Since(start), resp, err)
	if used, _ := ri.Value(budgetKey{}).(*atomic.Int64); used != nil && resp != nil {
		used.Add(tokensOf(resp.Usage))
	}
	return resp, err
}
