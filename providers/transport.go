package providers

import (
	"errors"
	"io"
	"net"
	"net/http"
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
type propagator struct {
	next http.RoundTripper
	prop propagation.TextMapPropagator
}

// RoundTrip injects, then sends.
func (p propagator) RoundTrip(req *http.Request) (*http.Response, error) {
	// A RoundTripper must not modify the caller's request, so the request
	// is cloned, but only when there is something to inject: without a
	// trace or baggage in the context (tracing off) there is not, and the
	// carrier, a map, is not even made (Options.Propagator).
	ctx := req.Context()
	if !trace.SpanContextFromContext(ctx).IsValid() && baggage.FromContext(ctx).Len() == 0 {
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
}

// Do sends one request.
func (a *attempt) Do(req *http.Request) (*http.Response, error) {
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
		if err := a.patch.apply(req, a.bodies); err != nil {
			return nil, err
		}
	}
	var span trace.Span
	if a.tracer != nil {
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
		span = s
		req = req.WithContext(ctx)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		if span != nil {
			a.endSpan(span, err)
		}
		return nil, err
	}
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
