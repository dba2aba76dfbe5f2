package gateway

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/switchboard-ai/switchboard/graphs"
)

// A proxied call (server.passthrough) is bounded as a graph's provider
// call is (CONTRACT §14): the provider's timeout bounds the whole call,
// its stream_idle_timeout each wait of a stream, its max_response_bytes
// the answer's body, and server.stream_write_timeout each write to a
// stream's client. And its tokens are charged to the key's token limits
// (CONTRACT §13), read from the answer's usage.

var (
	errProxyTimeout  = errors.New("the provider timed out")
	errProxyIdle     = errors.New("the provider's stream sent nothing for its stream_idle_timeout")
	errProxyTooLarge = errors.New("response too large")
)

// proxyCall is one proxied call's bounds and what was read of its usage.
// The proxy reads the answer on the handler's goroutine; only the timers'
// callbacks run elsewhere, and they only cancel.
type proxyCall struct {
	p   graphs.Provider
	ctx context.Context // the proxied request's; its cause says why it ended
	// tokens is the answer's usage.total_tokens, once read.
	tokens int64
	// failed is why the answer's body failed as it was copied (too large,
	// idle, past the timeout): the client gets the error when nothing of
	// the answer had left yet, else its response is cut short, not ended.
	failed error
	cancel context.CancelCauseFunc
}

type proxyCallKey struct{}

// startProxyCall bounds r's context by the provider's timeout and returns
// the request to proxy, with its call, and what ends the call.
func startProxyCall(r *http.Request, p graphs.Provider) (*http.Request, *proxyCall, func()) {
	ctx, cancel := context.WithCancelCause(r.Context())
	t := time.AfterFunc(cmp.Or(p.Timeout, graphs.DefaultProviderTimeout), func() { cancel(errProxyTimeout) })
	pc := &proxyCall{p: p, cancel: cancel}
	pc.ctx = context.WithValue(ctx, proxyCallKey{}, pc)
	return r.Clone(pc.ctx), pc, func() { t.Stop(); cancel(context.Canceled) }
}

// proxyCallOf returns the call a proxied request belongs to.
func proxyCallOf(r *http.Request) *proxyCall {
	pc, _ := r.Context().Value(proxyCallKey{}).(*proxyCall)
	return pc
}

// bound takes a successful answer: a whole one is read here, within the
// call's bounds, so that one too large or too slow is a 502 or a 504
// before anything reaches the client; a stream's body is bounded as it is
// copied (boundedStream).
func (pc *proxyCall) bound(resp *http.Response) error {
	limit := cmp.Or(pc.p.MaxResponseBytes, graphs.DefaultMaxResponseBytes)
	if resp.ContentLength > limit {
		return errProxyTooLarge
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "text/event-stream" {
		idle := cmp.Or(pc.p.StreamIdleTimeout, graphs.DefaultStreamIdleTimeout)
		s := &boundedStream{body: resp.Body, pc: pc, left: limit}
		s.idle = time.AfterFunc(idle, func() { pc.cancel(errProxyIdle) })
		s.idleFor = idle
		resp.Body = s
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	_ = resp.Body.Close()
	if err != nil {
		return err
	}
	if int64(len(b)) > limit {
		return errProxyTooLarge
	}
	var doc struct {
		Usage *struct {
			TotalTokens int64 `json:"total_tokens"`
		} `json:"usage"`
	}
	if json.Unmarshal(b, &doc) == nil && doc.Usage != nil {
		pc.tokens = doc.Usage.TotalTokens
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	resp.ContentLength = int64(len(b))
	resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
	return nil
}

// failure is the client's error for a proxied call that failed before its
// answer's status was sent.
func (pc *proxyCall) failure(err error) *Error {
	cause := context.Cause(pc.ctx)
	var ne net.Error
	switch {
	case errors.Is(cause, errProxyTimeout) || errors.Is(cause, errProxyIdle):
		return &Error{Status: http.StatusGatewayTimeout, Code: codeUpstreamTimeout, Message: "provider " + pc.p.Name + ": " + cause.Error()}
	case errors.As(err, &ne) && ne.Timeout():
		// The provider's transport bounds its wait for the answer's
		// headers by the same timeout, and may give up first.
		return &Error{Status: http.StatusGatewayTimeout, Code: codeUpstreamTimeout, Message: "provider " + pc.p.Name + ": " + errProxyTimeout.Error()}
	case errors.Is(err, errProxyTooLarge):
		return &Error{Status: http.StatusBadGateway, Code: codeUpstreamError,
			Message: "provider " + pc.p.Name + ": response too large (over " + strconv.FormatInt(cmp.Or(pc.p.MaxResponseBytes, graphs.DefaultMaxResponseBytes), 10) + " bytes)"}
	}
	// The transport's error names addresses; the client is told only
	// which provider failed.
	return &Error{Status: http.StatusBadGateway, Code: codeUpstreamError, Message: "provider " + pc.p.Name + " unreachable or failed before answering"}
}

// boundedStream is a proxied stream's body: at most left bytes more, no
// wait longer than idleFor for the next read (the call's context is
// cancelled then), and its usage read from the events that carry one.
type boundedStream struct {
	body    io.ReadCloser
	pc      *proxyCall
	left    int64
	idle    *time.Timer
	idleFor time.Duration
	// line is the event line being read, up to maxUsageLine bytes.
	line []byte
	long bool // the line being read is longer: not looked at
}

// maxUsageLine bounds the event line looked at for usage: a usage chunk
// is a few hundred bytes.
const maxUsageLine = 16 << 10

func (s *boundedStream) Read(p []byte) (int, error) {
	n, err := s.body.Read(p)
	if n > 0 {
		s.idle.Reset(s.idleFor)
		if int64(n) > s.left {
			s.pc.failed = errProxyTooLarge
			return 0, errProxyTooLarge
		}
		s.left -= int64(n)
		s.scan(p[:n])
	}
	if err != nil && !errors.Is(err, io.EOF) {
		s.pc.failed = cmp.Or(context.Cause(s.pc.ctx), err)
	}
	return n, err
}

func (s *boundedStream) Close() error {
	s.idle.Stop()
	return s.body.Close()
}

// scan looks at each complete event line for a usage.
func (s *boundedStream) scan(b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		part := b
		if i >= 0 {
			part = b[:i]
		}
		if !s.long {
			if len(s.line)+len(part) > maxUsageLine {
				s.long, s.line = true, s.line[:0]
			} else {
				s.line = append(s.line, part...)
			}
		}
		if i < 0 {
			return
		}
		if !s.long {
			s.pc.usageLine(s.line)
		}
		s.line, s.long = s.line[:0], false
		b = b[i+1:]
	}
}

// usageLine takes the total tokens of a `data:` line that carries a usage
// (the last chunk of a stream asked with stream_options.include_usage).
func (pc *proxyCall) usageLine(line []byte) {
	data, ok := bytes.CutPrefix(bytes.TrimSuffix(line, []byte("\r")), []byte("data:"))
	if !ok || !bytes.Contains(data, []byte(`"usage"`)) {
		return
	}
	var doc struct {
		Usage *struct {
			TotalTokens int64 `json:"total_tokens"`
		} `json:"usage"`
	}
	if json.Unmarshal(data, &doc) == nil && doc.Usage != nil && doc.Usage.TotalTokens > 0 {
		pc.tokens = doc.Usage.TotalTokens
	}
}

// proxyWriter bounds each write to a proxied stream's client by
// server.stream_write_timeout: a client that takes no bytes for that long
// fails the write, which ends the copy and the provider call.
type proxyWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	set     time.Time // when the deadline was last set
}

func (w *proxyWriter) Write(b []byte) (int, error) {
	// A new deadline once a sixteenth of the timeout has gone by, as a
	// graph's stream sets them (refreshDeadline).
	if now := time.Now(); now.Sub(w.set) > w.timeout/16 {
		w.set = now
		_ = w.rc.SetWriteDeadline(now.Add(w.timeout))
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets the proxy flush through the writer under it.
func (w *proxyWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
