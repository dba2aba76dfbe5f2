package providers

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-ai/switchboard/internal/redact"
)

// newTransport returns the one pooled transport of a provider: many idle
// connections per host so that concurrent runs reuse them, and a response
// header timeout equal to the provider's timeout.
//
// An HTTP/1.1 connection keeps its write buffer for as long as it lives, a
// whole stream included, and uses it only while a request leaves. A 32 KB
// one, which sent a 200-turn body in one write, was a third of what an
// open stream cost the gateway (issue 22); it is writeBuffer (1 KB), and a
// body over that leaves in two writes, the second through a transient
// buffer of its size.
//
// A call waits for a connection to come free rather than open one past
// half the files the process may open (maxConns).
func newTransport(timeout time.Duration) *http.Transport {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		MaxConnsPerHost:       maxConns(openFileLimit()),
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		ResponseHeaderTimeout: timeout,
		ReadBufferSize:        readBuffer,
		WriteBufferSize:       writeBuffer,
	}
}

// maxConns is a provider's bound on its connections under an open-file
// limit of limit; 0, none, when the limit is unknown or past any count of
// streams. A stream holds two files, its client's connection and its
// provider's. A call that finds no idle connection dials one, and when
// another call's connection comes free first it takes that one, and its
// dial completes as a spare. With thousands of streams opening and each
// freeing a connection as it hands off, the spares took the files that
// accepting clients and the next dials needed: at 9,700 streams under a
// 20,000-file limit, 10,717 provider connections beside 9,680 clients'
// (issue 22).
func maxConns(limit uint64) int {
	if limit == 0 || limit > 1<<24 {
		return 0
	}
	return int(limit / 2)
}

// writeBuffer is the size of an HTTP/1.1 connection's write buffer, which
// every connection keeps for its whole life, idle or streaming, though it
// is used only while a request leaves: net/http's default 4 KB was, after
// the server's own buffers, the largest thing an open stream held (issue
// 22). A request that does not fit leaves in two writes instead of one:
// its start through the buffer, the rest of its body straight from it.
const writeBuffer = 1 << 10

// readBuffer is the size of an HTTP/1.1 connection's read buffer, which a
// stream holds for as long as it lasts. A stream's body is read through
// the event reader's own buffer (eventBuffer) a line at a time, and a
// plain answer's is read whole into one buffer of its size (readBounded):
// net/http's default 4 KB only saved read calls when many chunks arrive at
// once.
const readBuffer = 1 << 10

// propagator injects the trace context of the request's context into its
// headers, so the provider's spans (when it traces) join the run's trace.
// It also counts what it sends for the pool's trim.
type propagator struct {
	next http.RoundTripper
	prop propagation.TextMapPropagator
	trim *idleTrim
}

// RoundTrip injects, then sends.
func (p propagator) RoundTrip(req *http.Request) (*http.Response, error) {
	p.trim.sending()
	// A RoundTripper must not modify the caller's request, so the request
	// is cloned, but only when there is something to inject: without a
	// trace or baggage in the context (tracing off) there is not, and the
	// carrier, a map, is not even made (Options.Propagator).
	ctx := req.Context()
	if !p.injects(ctx) {
		return p.next.RoundTrip(req)
	}
	h := propagation.HeaderCarrier{}
	p.prop.Inject(ctx, h)
	if len(h) == 0 {
		return p.next.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	for k, v := range h {
		req.Header[k] = v
	}
	return p.next.RoundTrip(req)
}

// injects reports whether ctx holds something to inject: a trace or
// baggage, without which the W3C propagators inject nothing.
func (p propagator) injects(ctx context.Context) bool {
	return trace.SpanContextFromContext(ctx).IsValid() || baggage.FromContext(ctx).Len() != 0
}

// attempt sends the request of one attempt of one call (go-openai hands it
// over through attemptDoer). It adds the provider's headers and the
// request's body patch (which writes the messages), traces the attempt,
// and remembers how the provider answered, which the retry decision needs
// and go-openai's errors do not carry.
type attempt struct {
	client  *http.Client
	headers map[string]string
	patch   *bodyPatch   // nil: the body is sent as go-openai built it
	bodies  *bodyBuffers // where patched bodies are built
	tracer  trace.Tracer // nil: no span
	// stream tells a streamed call, whose body the event reader reads,
	// from a non-streamed one, whose body decode reads here.
	stream bool
	// opened is set once a 2xx answer's headers arrived: from then on the
	// call is never retried. (Beside stream: a bool between two words
	// pads the attempt, and the call that holds it, by 8 bytes.)
	opened bool
	// maxBody bounds an answer's body (max_response_bytes).
	maxBody int64
	// secrets are masked in what a span records.
	secrets []string

	// header holds the last answer's headers (for Retry-After).
	header http.Header
	// body is the last answer's body.
	body io.ReadCloser
	// answer is a non-streamed call's decoded answer.
	answer *openai.ChatCompletionResponse

	// hold makes Do keep a request ready to send in held, unsent (a
	// stream's, which call.openStream sends); replay, when set, is what Do
	// answers instead of sending anything.
	hold   bool
	held   *http.Request
	replay *http.Response
}

// Do sends one request. For a stream's attempt (hold), it keeps the
// request ready to send in held instead, and answers errRequestHeld:
// call.openStream sends it. With replay set, it sends nothing and answers
// that response, which go-openai then makes its error of.
func (a *attempt) Do(req *http.Request) (*http.Response, error) {
	if resp := a.replay; resp != nil {
		a.replay = nil
		return resp, nil
	}
	if err := a.prepare(req); err != nil {
		return nil, err
	}
	if a.hold {
		a.held = req
		return nil, errRequestHeld
	}
	return a.send(req, false)
}

// errRequestHeld is what Do answers go-openai for a request it keeps in
// the attempt (held), to be sent by call.openStream.
var errRequestHeld = errors.New("request held")

// prepare adds the provider's headers and the body patch to req.
func (a *attempt) prepare(req *http.Request) error {
	for k, v := range a.headers {
		req.Header.Set(k, v)
	}
	if a.stream && req.Header.Get("Accept-Encoding") == "" {
		// Asked for nothing, net/http asks for gzip in a header map of
		// its own, which it keeps with the request for as long as the
		// answer's body is read: for a stream, its whole life (issue 22).
		// A stream of small events gains little from gzip, and each event
		// would wait in the provider's compressor.
		req.Header.Set("Accept-Encoding", "identity")
	}
	if a.patch != nil {
		return a.patch.apply(req, a.bodies)
	}
	return nil
}

// send sends req, through the attempt's client, or with direct straight
// through its transport (roundTrip), and takes the answer (answered).
// Tracing the attempt and taking its answer are in functions of their own,
// which have returned or not yet begun while the request waits for its
// answer: a direct send waits on the stream's own goroutine, whose stack
// must stay small (issue 22).
func (a *attempt) send(req *http.Request, direct bool) (*http.Response, error) {
	var span trace.Span
	if a.tracer != nil {
		req, span = a.startSpan(req)
	}
	var resp *http.Response
	var err error
	if direct {
		resp, err = a.roundTrip(req)
	} else {
		resp, err = a.client.Do(req)
	}
	if err != nil {
		if span != nil {
			a.endSpan(span, err)
		}
		return nil, err
	}
	if direct && redirected(resp.StatusCode) {
		_ = resp.Body.Close()
		if span != nil {
			span.SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
			span.End()
		}
		return nil, errRedirected
	}
	return a.answered(resp, span)
}

// startSpan starts the attempt's client span; req is returned with it in
// its context.
//
//go:noinline
func (a *attempt) startSpan(req *http.Request) (*http.Request, trace.Span) {
	ctx, s := a.tracer.Start(req.Context(), "POST", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			attribute.String("http.request.method", http.MethodPost),
			attribute.String("server.address", req.URL.Hostname()),
			attribute.String("url.full", req.URL.Redacted()),
		))
	if port := req.URL.Port(); port != "" {
		if n, err := strconv.Atoi(port); err == nil {
			s.SetAttributes(attribute.Int("server.port", n))
		}
	}
	return req.WithContext(ctx), s
}

// answered takes the answer to the attempt's request: it remembers how the
// provider answered, bounds what is read of an error body, decodes a whole
// answer, and ends the span when the answer is over. An open stream is
// answered errStreamOpened, its body in a.body.
//
//go:noinline
func (a *attempt) answered(resp *http.Response, span trace.Span) (*http.Response, error) {
	a.header = resp.Header
	a.opened = resp.StatusCode >= 200 && resp.StatusCode < 300
	switch {
	case !a.opened:
		// go-openai reads an error body whole; only its start is shown.
		resp.Body = capBody(resp.Body, maxErrorBody)
	case a.stream:
		// The event reader bounds a stream's body (eventReader.reset).
	default:
		if err := a.decode(resp); err != nil {
			if span != nil {
				a.endSpan(span, err)
			}
			return nil, err
		}
	}
	a.body = resp.Body
	if span != nil {
		span.SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
		if !a.opened {
			// go-openai reads an error body but does not always close it.
			span.SetStatus(codes.Error, resp.Status)
			span.End()
			return resp, nil
		}
		// The span lasts until the body is closed, which for a stream is
		// the end of the stream.
		resp.Body = &spanBody{ReadCloser: resp.Body, span: span}
		a.body = resp.Body
	}
	if a.stream && a.opened {
		return nil, errStreamOpened
	}
	return resp, nil
}

// roundTrip is the client's Do for a request sent once: its transport
// answers, and a failure is the error the client makes of it (a *url.Error
// naming the method and the URL; a URL with a user, which the client would
// mask, never comes here: upstream.viaClient). The client's own frames,
// about 1.2 KB of stack (for redirects, which roundTrip leaves to the
// caller: redirected), and the propagator's, when there is nothing to
// inject, are not on the stack while the request waits for its answer.
func (a *attempt) roundTrip(req *http.Request) (*http.Response, error) {
	rt := a.client.Transport
	if p, ok := rt.(propagator); ok && !p.injects(req.Context()) {
		p.trim.sending() // as p.RoundTrip would
		rt = p.next
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		if tlsErr, ok := err.(tls.RecordHeaderError); ok && string(tlsErr.RecordHeader[:]) == "HTTP/" {
			err = http.ErrSchemeMismatch // as the client says it
		}
		return nil, &url.Error{Op: "Post", URL: req.URL.String(), Err: err}
	}
	return resp, nil
}

// redirected reports whether the client, sent an answer of this status,
// could follow it to another address (http.Client's redirects).
func redirected(status int) bool {
	switch status {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// errRedirected is a direct send's answer that redirects: the attempt is
// sent again through the client, which decides whether to follow it.
var errRedirected = errors.New("redirected")

// errStreamOpened is what Do answers go-openai once a stream is open: the
// stream's body is read from the attempt (eventReader), and go-openai,
// handed the response, would wrap it in a stream reader with a 4 KB read
// buffer, never read through, the largest allocation of an open stream
// (issue 22). Error answers still go to go-openai, which decodes them.
var errStreamOpened = errors.New("stream opened")

// endSpan ends a failed attempt's span. A transport error names the
// provider's address, fine for a trace, but never a credential.
func (a *attempt) endSpan(span trace.Span, err error) {
	msg := redact.Secrets(redact.Known(err.Error(), a.secrets...))
	span.RecordError(errors.New(msg))
	span.SetStatus(codes.Error, msg)
	span.End()
}

// drainLimit and drainWait bound what drain reads and how long a stream
// waits for it: after a stream's [DONE] only the end of the body is left,
// and it comes at once.
const (
	drainLimit = 4 << 10
	drainWait  = 25 * time.Millisecond
)

// errDrained cancels a whole stream whose body did not end in drainWait.
var errDrained = errors.New("stream body did not end after [DONE]")

// drain reads what is left of the last answer's body, up to drainLimit, so
// that its connection goes back to the pool: a stream is read up to its
// [DONE] event (eventReader), before the end of the body, and net/http
// closes a connection whose body is closed unread. Without it every
// streamed call paid for a new connection (and with a real provider a TLS
// handshake) before its first token. The caller bounds the wait
// (drainWait).
func (a *attempt) drain() {
	if a.body != nil {
		_, _ = io.CopyN(io.Discard, a.body, drainLimit)
	}
}

// spanBody ends its span when the body is closed.
type spanBody struct {
	io.ReadCloser
	span trace.Span
	once sync.Once
}

// Close closes the body and ends the span.
func (b *spanBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(func() { b.span.End() })
	return err
}
