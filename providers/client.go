package providers

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/internal/redact"
	"github.com/switchboard-ai/switchboard/runtime"
)

// Options configures a Registry. The zero value is usable; each field
// documents its default.
type Options struct {
	// TracerProvider, when set, traces every HTTP attempt to a provider as
	// a client span named "POST" (so retries show in the trace). Nil or
	// the no-op provider: no spans of its own (starting one allocated for
	// nothing on every call). Trace context is propagated either way.
	TracerProvider trace.TracerProvider
	// Propagator injects the trace context of the call's context into
	// every outgoing request. Default propagation.TraceContext{} (W3C
	// traceparent and tracestate); the global propagator is never used.
	// It is asked only when the context holds a valid span context or
	// baggage, without which the W3C propagators inject nothing.
	Propagator propagation.TextMapPropagator
	// Logger receives retry warnings. Default: discard.
	Logger *slog.Logger
	// MaxRetries is how many times a call is retried before the first byte
	// of an answer (on 429, 5xx, connection refused or reset). Default 2;
	// negative: never.
	MaxRetries int
	// RetryBaseDelay is the first backoff; each retry doubles it, with
	// jitter. Default 250ms.
	RetryBaseDelay time.Duration
	// IdleStreamTimeout fails a stream that sends nothing for this long
	// with runtime.ErrUpstreamTimeout. Default 60s.
	IdleStreamTimeout time.Duration
	// CaptureContent lets a provider's error text that quotes the request
	// through (telemetry.capture_content). Default false: such a text is
	// withheld, since it would put prompts in logs, spans and errors.
	CaptureContent bool
}

// withDefaults returns o with its defaults applied.
func (o Options) withDefaults() Options {
	if o.Propagator == nil {
		o.Propagator = propagation.TraceContext{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case o.MaxRetries == 0:
		o.MaxRetries = graphs.DefaultProviderRetries
	case o.MaxRetries < 0:
		o.MaxRetries = 0
	}
	if o.RetryBaseDelay <= 0 {
		o.RetryBaseDelay = 250 * time.Millisecond
	}
	if o.IdleStreamTimeout <= 0 {
		o.IdleStreamTimeout = graphs.DefaultStreamIdleTimeout
	}
	return o
}

// Registry calls models at the configured providers. It implements
// runtime.Model: a request's Model.Provider picks the provider and
// Model.Model is the model asked for there. It is safe for concurrent use.
type Registry struct {
	models    map[string]runtime.Model
	upstreams []*upstream
}

var _ runtime.Model = (*Registry)(nil)

// New builds a Registry over providers (keyed by name, as in
// graphs.Set.Providers). Kind "" is taken as "openai". It fails on an
// unknown kind or a missing or malformed base URL.
func New(providers map[string]graphs.Provider, opts Options) (*Registry, error) {
	opts = opts.withDefaults()
	r := &Registry{models: make(map[string]runtime.Model, len(providers))}
	var tracer trace.Tracer
	if !runtime.TracingOff(opts.TracerProvider) {
		tracer = opts.TracerProvider.Tracer("github.com/switchboard-ai/switchboard/providers")
	}
	for name, p := range providers {
		switch p.Kind {
		case graphs.ProviderDemo:
			r.models[name] = demoModel{}
		case graphs.ProviderOpenAI, "":
			u, err := newUpstream(name, p, opts, tracer)
			if err != nil {
				return nil, err
			}
			r.models[name] = u
			r.upstreams = append(r.upstreams, u)
		default:
			return nil, fmt.Errorf("provider %q: unknown kind %q (want %q or %q)", name, p.Kind, graphs.ProviderOpenAI, graphs.ProviderDemo)
		}
	}
	return r, nil
}

// Has reports whether a provider of that name is configured.
func (r *Registry) Has(provider string) bool {
	_, ok := r.models[provider]
	return ok
}

// Chat makes one call to req.Model at its provider; see runtime.Model.
// Errors are *Error (wrapping runtime.ErrUpstream or
// runtime.ErrUpstreamTimeout), or wrap ctx.Err() when the caller went away.
func (r *Registry) Chat(ctx context.Context, req *runtime.ChatRequest, onDelta func(text string)) (*runtime.ChatResponse, error) {
	m, ok := r.models[req.Model.Provider]
	if !ok {
		return nil, &Error{Provider: req.Model.Provider, Message: "provider not configured", kind: runtime.ErrUpstream}
	}
	return m.Chat(ctx, req, onDelta)
}

// Transport returns the pooled HTTP transport of an OpenAI-compatible
// provider (its timeouts and connection settings, with trace propagation),
// or nil when there is no such provider: passthrough proxies through it.
func (r *Registry) Transport(provider string) http.RoundTripper {
	for _, u := range r.upstreams {
		if u.name == provider {
			return u.httpc.Transport
		}
	}
	return nil
}

// Close closes the idle connections of every provider. Calls in flight
// are not affected.
func (r *Registry) Close() {
	for _, u := range r.upstreams {
		u.trim.stop()
		u.transport.CloseIdleConnections()
	}
}

// upstream is one OpenAI-compatible provider with its connection pool.
type upstream struct {
	name       string
	baseURL    string
	apiKey     string
	headers    map[string]string
	timeout    time.Duration
	idle       time.Duration
	maxRetries int
	baseDelay  time.Duration
	transport  *http.Transport
	trim       *idleTrim // closes transport's idle connections after a burst
	httpc      *http.Client
	oc         *openai.Client // sends through the call's attempt (attemptDoer)
	tracer     trace.Tracer
	log        *slog.Logger
	bodies     bodyBuffers
	// maxResponse bounds an answer's body (max_response_bytes).
	maxResponse int64
	// secrets are the provider's key and secret header values, masked
	// wherever an error or a span would show them.
	secrets []string
	// capture lets an error text that quotes the request through.
	capture bool
	// viaClient sends every request through the client (call.openStream):
	// the base URL names a user.
	viaClient bool
	// drainWait is how long a stream waits for its body's end after
	// [DONE] (drainWait, the constant; a test that is about reuse, not
	// about that window, widens it).
	drainWait time.Duration
}

// newUpstream checks p and builds its client.
func newUpstream(name string, p graphs.Provider, opts Options, tracer trace.Tracer) (*upstream, error) {
	if p.BaseURL == "" {
		return nil, fmt.Errorf("provider %q: base_url is required", name)
	}
	base, err := url.Parse(p.BaseURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("provider %q: base_url %q is not an http(s) URL", name, p.BaseURL)
	}
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = graphs.DefaultProviderTimeout
	}
	retries := opts.MaxRetries
	if p.MaxRetries != nil {
		retries = *p.MaxRetries
	}
	idle := opts.IdleStreamTimeout
	if p.StreamIdleTimeout > 0 {
		idle = p.StreamIdleTimeout
	}
	maxResponse := p.MaxResponseBytes
	if maxResponse <= 0 {
		maxResponse = DefaultMaxResponseBytes
	}
	secrets := []string{p.APIKey}
	for k, v := range p.Headers {
		if redact.SecretName(k) {
			secrets = append(secrets, v, strings.TrimSpace(strings.TrimPrefix(v, "Bearer ")))
		}
	}
	tr := newTransport(timeout)
	trim := newIdleTrim(tr)
	return &upstream{
		trim:        trim,
		maxResponse: maxResponse,
		drainWait:   drainWait,
		viaClient:   base.User != nil,
		secrets:     secrets,
		capture:     opts.CaptureContent,
		name:        name,
		baseURL:     p.BaseURL,
		apiKey:      p.APIKey,
		headers:     p.Headers,
		timeout:     timeout,
		idle:        idle,
		maxRetries:  retries,
		baseDelay:   opts.RetryBaseDelay,
		transport:   tr,
		// No client timeout: it would cut long streams. The call's
		// context bounds each call instead.
		httpc:  &http.Client{Transport: propagator{next: tr, prop: opts.Propagator, trim: trim}},
		oc:     newClient(p.APIKey, p.BaseURL),
		tracer: tracer,
		log:    opts.Logger,
	}, nil
}
