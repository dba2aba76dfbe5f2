package providers

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	openai "github.com/sashabaranov/go-openai"

	"github.com/switchboard-ai/switchboard/internal/redact"
	"github.com/switchboard-ai/switchboard/runtime"
)

// Error is a provider failure. It wraps runtime.ErrUpstreamTimeout when the
// provider did not answer in time and runtime.ErrUpstream otherwise, so
// callers branch with errors.Is; errors.As gives the provider's status.
//
// Its text reaches clients, logs and spans, so it never holds what the
// network error underneath says (addresses, ports: see describe), any
// credential (masked), or the provider's echo of the prompt when content
// capture is off (withheld); see scrub.
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
	// unreachable reads "provider openai unreachable (...)".
	unreachable bool
}

// Error reads like `provider openai: status 500: boom`, or `provider openai
// unreachable (connection refused)`.
func (e *Error) Error() string {
	switch {
	case e.StatusCode != 0:
		return fmt.Sprintf("provider %s: status %d: %s", e.Provider, e.StatusCode, e.Message)
	case e.unreachable:
		return fmt.Sprintf("provider %s %s", e.Provider, e.Message)
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
	errCallTimeout = errors.New("call timed out")
	errStreamIdle  = errors.New("stream idle")
)

// classify turns a failed call into the error runtime.Model promises: the
// caller's ctx.Err() when the caller went away, else an *Error.
func (u *upstream) classify(ctx, callCtx context.Context, req *runtime.ChatRequest, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		if errors.Is(cerr, context.DeadlineExceeded) {
			// The caller's own deadline passed while the provider worked:
			// for the client that is the provider being too slow.
			return fmt.Errorf("provider %s: %w: %w", u.name, runtime.ErrUpstreamTimeout, cerr)
		}
		return fmt.Errorf("provider %s: %w", u.name, cerr)
	}
	switch context.Cause(callCtx) {
	case errCallTimeout:
		return &Error{Provider: u.name, kind: runtime.ErrUpstreamTimeout, cause: err,
			Message: fmt.Sprintf("no complete answer within %s", u.timeout)}
	case errStreamIdle:
		return &Error{Provider: u.name, kind: runtime.ErrUpstreamTimeout, cause: err,
			Message: fmt.Sprintf("stream idle for %s", u.idle)}
	}
	if status, msg, ok := apiStatus(err); ok {
		return &Error{Provider: u.name, StatusCode: status, Message: u.scrub(msg, req), kind: runtime.ErrUpstream, cause: err}
	}
	var apiErr *openai.APIError
	if errors.As(err, &apiErr) {
		// An error event in a stream that had started.
		return &Error{Provider: u.name, Message: "stream error: " + u.scrub(apiErr.Message, req), kind: runtime.ErrUpstream, cause: err}
	}
	e := describe(err)
	e.Provider, e.cause = u.name, err
	return e
}

// describe says what kind of failure err is, in words that name no
// address: net errors print both ends of the connection, which a client
// must not see (and a log gains nothing from).
func describe(err error) *Error {
	up := func(msg string) *Error { return &Error{Message: msg, kind: runtime.ErrUpstream} }
	unreachable := func(why string) *Error {
		return &Error{Message: "unreachable (" + why + ")", kind: runtime.ErrUpstream, unreachable: true}
	}
	var (
		dnsErr  *net.DNSError
		opErr   *net.OpError
		netErr  net.Error
		certErr *tls.CertificateVerificationError
		recErr  tls.RecordHeaderError
		synErr  *json.SyntaxError
		typErr  *json.UnmarshalTypeError
		ours    *answerError
	)
	switch {
	case errors.Is(err, errTooLarge), errors.As(err, &ours):
		return up(err.Error()) // our own words
	case errors.Is(err, openai.ErrTooManyEmptyStreamMessages):
		return up("malformed stream: too many lines that are not events")
	case errors.As(err, &dnsErr):
		return unreachable("name not resolved")
	case errors.Is(err, syscall.ECONNREFUSED):
		return unreachable("connection refused")
	case errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE):
		return unreachable("the gateway has too many open files")
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return unreachable("the gateway has no free local port")
	case errors.As(err, &certErr), errors.As(err, &recErr):
		return unreachable("TLS handshake failed")
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return unreachable("cannot connect")
	case errors.As(err, &netErr) && netErr.Timeout():
		return &Error{Message: "timed out", kind: runtime.ErrUpstreamTimeout}
	case errors.Is(err, syscall.ECONNRESET):
		return up("connection reset before the answer ended")
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return up("connection closed before the answer ended")
	case errors.As(err, &synErr), errors.As(err, &typErr):
		return up("malformed answer: not a chat completion")
	}
	return up("request failed")
}

// answerError is an answer that makes no sense; its text is the gateway's
// own and safe to show.
type answerError struct{ msg string }

func (e *answerError) Error() string { return e.msg }

// maxErrorText bounds the provider's text shown in an error.
const maxErrorText = 300

// scrub makes a provider's error text fit to show: credentials masked (the
// provider's own key and secret headers wherever they appear, and anything
// shaped like one), IP addresses masked (its own network's), an echo of the request withheld unless content capture
// is on, and the text cut to maxErrorText.
func (u *upstream) scrub(msg string, req *runtime.ChatRequest) string {
	msg = redact.Addresses(redact.Secrets(redact.Known(msg, u.secrets...)))
	if !u.capture && req != nil && redact.Echoes(msg, promptTexts(req)) {
		return "the provider's error text quotes the request, so it is withheld (telemetry.capture_content is off)"
	}
	if len(msg) > maxErrorText {
		cut := maxErrorText
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "..."
	}
	return msg
}

// promptTexts yields the text of every message of a call.
func promptTexts(req *runtime.ChatRequest) func(yield func(string) bool) {
	return func(yield func(string) bool) {
		for _, run := range req.Messages {
			for i := range run {
				m := &run[i]
				if m.Content != "" && !yield(m.Content) {
					return
				}
				for _, c := range m.ToolCalls {
					if c.Function.Arguments != "" && !yield(c.Function.Arguments) {
						return
					}
				}
			}
		}
	}
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
		if msg == "" {
			msg = http.StatusText(reqErr.HTTPStatusCode)
		}
		return reqErr.HTTPStatusCode, msg, true
	}
	return 0, "", false
}

// retryable reports whether a failure that happened before any byte of a
// successful answer is worth another attempt: rate limits, server errors,
// connections refused, reset or closed before an answer, and connections
// the gateway could not open for want of its own resources (localExhaustion).
func retryable(err error) bool {
	if status, _, ok := apiStatus(err); ok {
		return status == http.StatusTooManyRequests || status >= 500
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || localExhaustion(err)
}

// localExhaustion reports whether err is a dial that failed for want of
// the gateway's own resources: a file descriptor (EMFILE, ENFILE) or a
// local port (EADDRNOTAVAIL). Nothing reached the provider, and the want
// passes as other connections close (issue 22: handoffs at the limit).
func localExhaustion(err error) bool {
	var opErr *net.OpError
	if !errors.As(err, &opErr) || opErr.Op != "dial" {
		return false
	}
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.EADDRNOTAVAIL)
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
