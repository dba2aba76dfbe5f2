package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"syscall"

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
		var oe *net.OpError
		switch {
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
			return runtime.HookVerdict{}, fmt.Errorf("no answer within %s", hook.Timeout)
		case errors.As(err, &ue), errors.As(err, &oe):
			// The network error names the hook's host and port: only
			// what failed goes on.
			return runtime.HookVerdict{}, fmt.Errorf("unreachable: %s", netFailure(err))
		}
		return runtime.HookVerdict{}, err
	}
	return runtime.ParseHookVerdict(out)
}

// netFailure says what failed in a network error, without the addresses
// it holds.
func netFailure(err error) string {
	var dns *net.DNSError
	var errno syscall.Errno
	var oe *net.OpError
	switch {
	case errors.As(err, &dns):
		return "its host name does not resolve"
	case errors.As(err, &errno):
		return errno.Error()
	case errors.As(err, &oe):
		return oe.Op + " failed"
	}
	return "the request failed"
}
