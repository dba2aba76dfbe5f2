// Package webhooks calls the HTTP endpoints a config names: server-side
// tools (a POST of the call's JSON arguments whose body is the result) and
// on_handoff hooks. URLs only ever come from config, never from a request.
package webhooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/runtime"
)

// maxResultBytes bounds a tool's result: a model cannot use more anyway. A
// bigger result is an error (runtime.ErrResultTooLarge), never cut short:
// half a JSON document read as a success would mislead the model.
const maxResultBytes = 1 << 20

// Client runs tools and calls hooks over one pooled HTTP transport.
type Client struct {
	http       *http.Client
	propagator propagation.TextMapPropagator
}

var (
	_ runtime.ToolRunner = (*Client)(nil)
	_ runtime.HookCaller = (*Client)(nil)
)

// New returns a Client. propagator, when not nil, injects the trace context
// into every call so tool servers join the trace.
func New(propagator propagation.TextMapPropagator) *Client {
	t := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   5 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &Client{http: &http.Client{Transport: t, CheckRedirect: noRedirects}, propagator: propagator}
}

// noRedirects makes a 3xx the answer: followed, it would POST the payload
// (the user's text, a tool call's arguments) again to an address that is
// not in the config, and a 2xx there would pass a judge or a hook. As a
// non-2xx it fails the call, closed.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// Run POSTs the call's arguments to its HTTP tool and returns the response
// body. A non-2xx status (a redirect too: it is not followed), a timeout,
// an unreachable tool or a body over 1 MiB is an error.
func (c *Client) Run(ctx context.Context, call *runtime.ToolInvocation) (string, error) {
	tool := call.Tool
	if tool.Kind != graphs.ToolHTTP || tool.HTTP == nil {
		return "", fmt.Errorf("tool %q is not an HTTP tool", tool.Name)
	}
	arguments := call.Call.Function.Arguments
	if strings.TrimSpace(arguments) == "" {
		arguments = "{}"
	}
	if !json.Valid([]byte(arguments)) {
		return "", fmt.Errorf("arguments are not valid JSON")
	}
	body, err := c.post(ctx, tool.HTTP.URL, tool.HTTP.Timeout, []byte(arguments))
	if err != nil {
		return "", err
	}
	return string(body), nil
}

// Call POSTs payload as JSON to the hook.
func (c *Client) Call(ctx context.Context, hook *graphs.Hook, payload any) error {
	b, err := json.Marshal(payload)
	if err != nil {
		return fmt.Errorf("encode hook payload: %w", err)
	}
	_, err = c.post(ctx, hook.URL, hook.Timeout, b)
	return err
}

func (c *Client) post(ctx context.Context, url string, timeout time.Duration, body []byte) ([]byte, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if c.propagator != nil {
		c.propagator.Inject(ctx, propagation.HeaderCarrier(req.Header))
	}
	resp, err := c.http.Do(req)
	if err != nil {
		// net/http's error names the URL, which may carry credentials (it
		// masks a password as *** but not a query's api_key), and the
		// connection's addresses. The text becomes a tool's result, which
		// the model and the session's readers see, and a log line: only
		// what failed goes on (CONTRACT §14); the cause stays for errors.Is.
		switch {
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			return nil, &postError{msg: fmt.Sprintf("no answer within %s", timeout), err: err}
		case errors.Is(err, context.Canceled):
			return nil, &postError{msg: "cancelled", err: err}
		}
		return nil, &postError{msg: "unreachable: " + netFailure(err), err: err}
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, maxResultBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read answer: %w", err)
	}
	if len(out) > maxResultBytes {
		return nil, fmt.Errorf("%w (over %d bytes)", runtime.ErrResultTooLarge, maxResultBytes)
	}
	if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
		return nil, fmt.Errorf("status %d: redirects are not followed", resp.StatusCode)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		snippet := strings.TrimSpace(string(out))
		if len(snippet) > 200 {
			snippet = snippet[:200] + "..."
		}
		return nil, fmt.Errorf("status %d: %s", resp.StatusCode, snippet)
	}
	return out, nil
}

// postError is a failed POST described without its URL or addresses.
type postError struct {
	msg string
	err error
}

func (e *postError) Error() string { return e.msg }
func (e *postError) Unwrap() error { return e.err }
