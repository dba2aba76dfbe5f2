// Package telemetry sets up Switchboard's observability: the OpenTelemetry
// tracer provider and propagator (exported over OTLP/HTTP), the HTTP server
// span middleware, and the Prometheus metrics. Nothing here touches OTel or
// Prometheus globals; every provider and registry is passed in or returned.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"runtime/debug"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/internal/redact"
)

// ScopeName is the instrumentation scope of the spans this package creates.
const ScopeName = "github.com/switchboard-ai/switchboard/telemetry"

// tracesPath is where OTLP/HTTP receivers take traces, relative to the base
// URL given in OTEL_EXPORTER_OTLP_ENDPOINT or telemetry.otlp_endpoint.
const tracesPath = "/v1/traces"

// Tracing is the tracing setup of one gateway: the tracer provider every
// component creates its spans from and the propagator that reads and writes
// traceparent. Without an OTLP endpoint the provider is a no-op, so that
// spans cost nothing per request.
type Tracing struct {
	// Provider creates tracers; a no-op provider when tracing is off.
	Provider trace.TracerProvider
	// Propagator is W3C TraceContext plus Baggage.
	Propagator propagation.TextMapPropagator
	// CaptureContent says whether prompts and completions go on spans.
	CaptureContent bool

	sdk *sdktrace.TracerProvider // nil when tracing is off
}

// Setup builds the tracing of cfg. With cfg.OTLPEndpoint set, spans are
// batched and exported to <endpoint>/v1/traces over OTLP/HTTP (plain HTTP
// for an http:// endpoint); the exporter's other settings (headers,
// compression, timeouts) follow the standard OTEL_EXPORTER_OTLP_* variables
// and the batching the OTEL_BSP_* ones. Export failures are logged to logger.
func Setup(ctx context.Context, cfg graphs.Telemetry, logger *slog.Logger) (*Tracing, error) {
	t := &Tracing{
		Propagator: propagation.NewCompositeTextMapPropagator(
			propagation.TraceContext{}, propagation.Baggage{}),
		CaptureContent: cfg.CaptureContent,
	}
	if cfg.OTLPEndpoint == "" {
		t.Provider = noop.NewTracerProvider()
		return t, nil
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	endpoint, err := tracesURL(cfg.OTLPEndpoint)
	if err != nil {
		return nil, err
	}
	// New does not dial: the collector may come up after the gateway.
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(endpoint))
	if err != nil {
		return nil, fmt.Errorf("otlp exporter: %w", err)
	}
	name := cfg.ServiceName
	if name == "" {
		name = "switchboard"
	}
	attrs := []attribute.KeyValue{semconv.ServiceName(name)}
	if v := buildVersion(); v != "" {
		attrs = append(attrs, semconv.ServiceVersion(v))
	}
	t.sdk = sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(&loggingExporter{SpanExporter: exp, logger: logger, endpoint: redact.URL(endpoint)}),
		sdktrace.WithResource(resource.NewWithAttributes(semconv.SchemaURL, attrs...)),
	)
	t.Provider = t.sdk
	// A collector's URL may carry a password: logged masked (CONTRACT §14).
	logger.Info("tracing enabled", "otlp_endpoint", redact.URL(endpoint), "service", name)
	return t, nil
}

// Enabled reports whether spans are recorded and exported. When it is
// false, instrumentation may skip work that only feeds spans.
func (t *Tracing) Enabled() bool { return t != nil && t.sdk != nil }

// Shutdown flushes the spans not yet exported and stops the exporter. It
// gives up when ctx ends, so bound ctx: an unreachable collector would
// otherwise hold it through the exporter's retries.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if !t.Enabled() {
		return nil
	}
	if err := t.sdk.Shutdown(ctx); err != nil {
		return fmt.Errorf("tracing shutdown: %w", err)
	}
	return nil
}

// tracesURL turns an OTLP base URL (http://127.0.0.1:4318, with or without a
// trailing slash or a path prefix) into the traces URL. A URL already ending
// in /v1/traces is taken as is, since that is an easy mistake to make.
func tracesURL(base string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(base))
	if err != nil {
		return "", fmt.Errorf("otlp endpoint %q: %w", redact.URL(base), errors.New(redact.Secrets(err.Error())))
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("otlp endpoint %q: %w", redact.URL(base), errEndpointURL)
	}
	p := strings.TrimRight(u.Path, "/")
	if !strings.HasSuffix(p, tracesPath) {
		p += tracesPath
	}
	u.Path, u.RawPath = p, ""
	return u.String(), nil
}

var errEndpointURL = errors.New("want an http(s) base URL such as http://127.0.0.1:4318")

// buildVersion is the main module's version when the binary was built from a
// tagged module (go install ...@v1.2.3); empty for a development build.
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok || bi.Main.Version == "" || bi.Main.Version == "(devel)" {
		return ""
	}
	return bi.Main.Version
}

// loggingExporter reports failed exports to the gateway's logger. The batch
// processor would hand the error to OTel's global error handler, which this
// package leaves alone, so the error is logged here and not passed on.
type loggingExporter struct {
	sdktrace.SpanExporter
	logger   *slog.Logger
	endpoint string
}

// ExportSpans exports spans and logs a failure.
func (e *loggingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if err := e.SpanExporter.ExportSpans(ctx, spans); err != nil {
		e.logger.Warn("trace export failed", "otlp_endpoint", e.endpoint, "spans", len(spans), "err", redact.Secrets(err.Error()))
	}
	return nil
}
