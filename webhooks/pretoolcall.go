package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/runtime"
)

var _ runtime.PreToolCallHook = (*Client)(nil)

// PreToolCall POSTs a call to a graph's pre_tool_call hook and reads its
// answer (runtime.ParseHookVerdict). A non-2xx status, a timeout, an
// unreachable hook or an answer that is not a verdict is an error, whose
// text (without the hook's URL: the model reads it) says which.
func (c *Client) PreToolCall(ctx context.Context, hook *graphs.Hook, call *runtime.HookCall) (runtime.HookVerdict, error) {
	b, err := json.Marshal(call)
	if err != nil {
		return runtime.HookVerdict{}, fmt.Errorf("encode pre_tool_call payload: %w", err)
	}
	out, err := c.post(ctx, hook.URL, hook.Timeout, b)
	if err != nil {
		var ue *url.Error
		switch {
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
			return runtime.HookVerdict{}, fmt.Errorf("no answer within %s", hook.Timeout)
		case errors.As(err, &ue):
			return runtime.HookVerdict{}, fmt.Errorf("unreachable: %w", ue.Err)
		}
		return runtime.HookVerdict{}, err
	}
	return runtime.ParseHookVerdict(out)
}
