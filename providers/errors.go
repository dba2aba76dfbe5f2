package providers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/switchboard-ai/switchboard/runtime"
)

// Error is a provider failure. It wraps runtime.ErrUpstreamTimeout when the
// provider did not answer in time and runtime.ErrUpstream otherwise, so
// callers branch with errors.Is; errors.As gives the provider's status.
type Error struct {
	// Provider is the provider's name.
	Provider string
	// StatusCode is the provider's HTTP status; 0 when it never answered
	// one (connection failure, timeout, broken stream).
	StatusCode int
	// Message is the provider's error message, or what went wrong.
	Message string

	kind  error // runtime.ErrUpstream or runtime.ErrUpstreamTimeout
	cause error
}

// Error reads like `provider openai: status 500: boom`.
func (e *Error) Error() string {
	if e.StatusCode != 0 {
		return fmt.Sprintf("provider %s: status %d: %s", e.Provider, e.StatusCode, e.Message)
	}
	return fmt.Sprintf("provider %s: %s", e.Provider, e.Message)
}

// Unwrap returns the sentinel (runtime.ErrUpstream or
// runtime.ErrUpstreamTimeout) and the underlying error.
func (e *Error) Unwrap() []error {
	if e.cause == nil {
		return []error{e.kind}
	}
	return []error{e.kind, e.cause}
}

// Causes a call's context is cancelled with, to tell a provider timeout
// from the caller going away.
var (
	errFirstByteTimeout = errors.New("no answer in time")
	errStreamIdle       = errors.New("stream idle")
)

// classify turns a failed call into the error runtime.Model promises: the
// caller's ctx.Err() when the caller went away, else an *Error.
func (u *upstream) classify(ctx, callCtx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		if errors.Is(cerr, context.DeadlineExceeded) {
			// The caller's own deadline passed while the provider worked:
			// for the client that is the provider being too slow.
			return fmt.Errorf("provider %s: %w: %w", u.name, runtime.ErrUpstreamTimeout, cerr)
		}
		return fmt.Errorf("provider %s: %w", u.name, cerr)
	}
	switch context.Cause(callCtx) {
	case errFirstByteTimeout:
		return &Error{Provider: u.name, kind: runtime.ErrUpstreamTimeout, cause: err,
			Message: fmt.Sprintf("no answer within %s", u.timeout)}
	case errStreamIdle:
		return &Error{Provider: u.name, kind: runtime.ErrUpstreamTimeout, cause: err,
			Message: fmt.Sprintf("stream idle for %s", u.idle)}
	}
	if status, msg, ok := apiStatus(err); ok {
		return &Error{Provider: u.name, StatusCode: status, Message: msg, kind: runtime.ErrUpstream, cause: err}
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return &Error{Provider: u.name, Message: err.Error(), kind: runtime.ErrUpstreamTimeout, cause: err}
	}
	return &Error{Provider: u.name, Message: err.Error(), kind: runtime.ErrUpstream, cause: err}
}

// apiStatus extracts the HTTP status and message of an error answer.
func apiStatus(err error) (int, string, bool) {
	var apiErr *openai.APIError
	if errors.As(err, &apiErr) && apiErr.HTTPStatusCode != 0 {
		return apiErr.HTTPStatusCode, apiErr.Message, true
	}
	var reqErr *openai.RequestError
	if errors.As(err, &reqErr) && reqErr.HTTPStatusCode != 0 {
		msg := strings.TrimSpace(string(reqErr.Body))
		if len(msg) > 300 {
			msg = msg[:300] + "..."
		}
		if msg == "" {
			msg = http.StatusText(reqErr.HTTPStatusCode)
		}
		return reqErr.HTTPStatusCode, msg, true
	}
	return 0, "", false
}

// retryable reports whether a failure that happened before any byte of a
// successful answer is worth another attempt: rate limits, server errors
// and connections refused, reset or closed before an answer.
func retryable(err error) bool {
	if status, _, ok := apiStatus(err); ok {
		return status == http.StatusTooManyRequests || status >= 500
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// maxRetryAfter caps how long a Retry-After makes a call wait.
const maxRetryAfter = 10 * time.Second

// retryAfter reads how long the provider asked to wait: retry-after-ms
// (sent by OpenAI and Azure), else Retry-After in seconds or as an HTTP
// date. It is capped at maxRetryAfter.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	var d time.Duration
	if ms, err := strconv.ParseFloat(h.Get("Retry-After-Ms"), 64); err == nil && ms >= 0 {
		d = time.Duration(ms * float64(time.Millisecond))
	} else if v := h.Get("Retry-After"); v == "" {
		return 0, false
	} else if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		d = time.Duration(s * float64(time.Second))
	} else if t, err := http.ParseTime(v); err == nil {
		d = max(t.Sub(now), 0)
	} else {
		return 0, false
	}
	return min(d, maxRetryAfter), true
}
