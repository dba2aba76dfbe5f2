package telemetry

import (
	"net"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-ai/switchboard/runtime"
)

// ServerMiddleware returns a gin middleware that makes the HTTP server span
// of each request, a child of the client's traceparent when it sent one,
// and puts it in the request's context so that the handler's spans are its
// children. Probes and scrapes (/healthz, /readyz, /metrics) get no span.
// With a no-op provider (tracing off) the middleware does nothing.
func ServerMiddleware(tp trace.TracerProvider, prop propagation.TextMapPropagator) gin.HandlerFunc {
	if runtime.TracingOff(tp) {
		return func(c *gin.Context) { c.Next() }
	}
	if prop == nil {
		prop = propagation.TraceContext{}
	}
	tracer := tp.Tracer(ScopeName)
	return func(c *gin.Context) {
		r := c.Request
		switch r.URL.Path {
		case "/healthz", "/readyz", "/metrics":
			c.Next()
			return
		}
		ctx := prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		method, known := requestMethod(r.Method)
		route := c.FullPath() // empty when no route matched
		name := method
		if route != "" {
			name += " " + route
		}
		ctx, span := tracer.Start(ctx, name,
			trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(requestAttributes(c, method, known, route)...))
		defer span.End()
		// An unsampled span still goes into the context, so that the
		// handler's spans share its trace and its sampling decision.
		c.Request = r.WithContext(ctx)
		if !span.IsRecording() {
			c.Next()
			return
		}
		defer func() {
			// A panic passes through here before an outer recovery writes
			// its 500, so the status gin has is not the one sent.
			if p := recover(); p != nil {
				span.SetAttributes(semconv.HTTPResponseStatusCode(http.StatusInternalServerError),
					semconv.ErrorTypeKey.String("panic"))
				span.SetStatus(codes.Error, "panic")
				panic(p)
			}
		}()
		c.Next()
		status := c.Writer.Status()
		span.SetAttributes(semconv.HTTPResponseStatusCode(status))
		// Server spans are errors only for 5xx: a 4xx is the client's fault.
		if status >= 500 {
			span.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(status)))
			span.SetStatus(codes.Error, http.StatusText(status))
		}
	}
}

// requestMethod is the method as the HTTP conventions want it: one of the
// known methods, or _OTHER (then known is false) so that a client cannot
// invent span names.
func requestMethod(m string) (method string, known bool) {
	switch m {
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch,
		http.MethodHead, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m, true
	}
	return "_OTHER", false
}

// requestAttributes are the HTTP semantic convention attributes known
// before the handler runs.
func requestAttributes(c *gin.Context, method string, known bool, route string) []attribute.KeyValue {
	r := c.Request
	attrs := make([]attribute.KeyValue, 0, 10)
	attrs = append(attrs,
		semconv.HTTPRequestMethodKey.String(method),
		semconv.URLPath(r.URL.Path),
		semconv.URLScheme(scheme(r)),
	)
	if !known {
		attrs = append(attrs, semconv.HTTPRequestMethodOriginal(r.Method))
	}
	if route != "" {
		attrs = append(attrs, semconv.HTTPRoute(route))
	}
	if host, port := splitHostPort(r.Host); host != "" {
		attrs = append(attrs, semconv.ServerAddress(host))
		if port > 0 {
			attrs = append(attrs, semconv.ServerPort(port))
		}
	}
	if ip := c.ClientIP(); ip != "" {
		attrs = append(attrs, semconv.ClientAddress(ip))
	}
	if ua := r.UserAgent(); ua != "" {
		attrs = append(attrs, semconv.UserAgentOriginal(ua))
	}
	if r.ProtoMajor == 2 {
		attrs = append(attrs, semconv.NetworkProtocolVersion("2"))
	} else if r.ProtoMajor == 1 {
		attrs = append(attrs, semconv.NetworkProtocolVersion("1."+strconv.Itoa(r.ProtoMinor)))
	}
	return attrs
}

func scheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

// splitHostPort splits a Host header; the port is 0 when absent or invalid.
func splitHostPort(hostport string) (string, int) {
	host, portStr, err := net.SplitHostPort(hostport)
	if err != nil {
		return hostport, 0 // no port
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return host, 0
	}
	return host, port
}
