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

// InterceptModel refuses a call past the budget. Answers are counted
// where they come, by the innermost model function (charge).
func (budget) InterceptModel(next ModelFunc) ModelFunc {
	return func(ctx context.Context, call *ModelCall) (*ChatResponse, error) {
		used, _ := call.Run.Value(budgetKey{}).(*atomic.Int64)
		if err := spent(used, call.Run.Graph.MaxTokensPerRun); err != nil {
			return nil, err
		}
		return next(ctx, call)
	}
}

// charge counts a model call's answer in the run's usage and against its
// token budget.
func (ri *RunInfo) charge(u Usage) {
	ri.rn.addUsage(u)
	if used, _ := ri.Value(budgetKey{}).(*atomic.Int64); used != nil {
		used.Add(tokensOf(u))
	}
}

// spent refuses a model call once used has reached limit (none when
// limit is not set).
func spent(used *atomic.Int64, limit int64) error {
	if used == nil || limit <= 0 {
		return nil
	}
	if n := used.Load(); n >= limit {
		return fmt.Errorf("%w: the run has used %d tokens (max_tokens_per_run %d) and needs another model call", ErrBudgetExceeded, n, limit)
	}
	return nil
}

// tokensOf is what a call's usage counts against the budget.
func tokensOf(u Usage) int64 {
	if n := int64(u.PromptTokens + u.CompletionTokens); n != 0 {
		return n
	}
	return int64(u.TotalTokens)
}

// CallModel makes a model call of the run outside its agents' turns: a
// model guardrail's judge, for agent's text. It is one of the run's model
// calls: traced as a `chat` span and counted in the provider metrics as the
// agents' calls are (CONTRACT §5), its usage in the reply's (§3.1: "sums
// every model call of the run"), and its tokens against max_tokens_per_run
// (§8: "sub-agents and model guardrails included"). So once the budget is
// spent it does not start, and returns ErrBudgetExceeded: the run ends with
// 422 budget_exceeded. It passes none of the interceptors (a guardrail
// would judge its own judge).
func (ri *RunInfo) CallModel(ctx context.Context, agent *graphs.Agent, req *ChatRequest) (*ChatResponse, error) {
	rn := ri.rn
	if rn == nil {
		return nil, errors.New("runtime: CallModel needs a run's RunInfo")
	}
	used, _ := ri.Value(budgetKey{}).(*atomic.Int64)
	if err := spent(used, ri.Graph.MaxTokensPerRun); err != nil {
		return nil, err
	}
	call := &ModelCall{Run: ri, Agent: agent, Request: req}
	ctx, span := rn.obs.startModel(ctx, call)
	start := time.Now()
	resp, err := rn.opts.Model.Chat(ctx, req, nil)
	resp, err = rn.obs.endModel(span, call, time.Since(start), resp, err)
	if resp != nil {
		ri.charge(resp.Usage)
	}
	return resp, err
}
