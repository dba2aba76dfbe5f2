package telemetry

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

func init() { gin.SetMode(gin.TestMode) }

var testPropagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// newTracedRouter is a gin engine with the middleware and routes like the
// gateway's; handlers record the span they see and start a child span.
func newTracedRouter(tp trace.TracerProvider, seen *trace.SpanContext) *gin.Engine {
	r := gin.New()
	r.Use(ServerMiddleware(tp, testPropagator))
	handler := func(status int) gin.HandlerFunc {
		return func(c *gin.Context) {
			*seen = trace.SpanContextFromContext(c.Request.Context())
			_, span := tp.Tracer("test").Start(c.Request.Context(), "invoke_agent triage")
			span.End()
			c.Status(status)
		}
	}
	r.POST("/v1/chat/completions", handler(http.StatusOK))
	r.GET("/v1/sessions/:id", handler(http.StatusNotFound))
	r.GET("/v1/models", handler(http.StatusBadGateway))
	r.GET("/healthz", handler(http.StatusOK))
	return r
}

func TestServerMiddlewareSpans(t *testing.T) {
	const clientTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	const clientSpan = "00f067aa0ba902b7"
	tests := []struct {
		name        string
		method      string
		target      string
		traceparent string
		wantName    string
		wantRoute   string
		wantStatus  int
		wantError   bool
	}{
		{name: "child of traceparent", method: "POST", target: "/v1/chat/completions",
			traceparent: "00-" + clientTrace + "-" + clientSpan + "-01",
			wantName:    "POST /v1/chat/completions", wantRoute: "/v1/chat/completions", wantStatus: 200},
		{name: "root without traceparent", method: "POST", target: "/v1/chat/completions",
			wantName: "POST /v1/chat/completions", wantRoute: "/v1/chat/completions", wantStatus: 200},
		{name: "route template, 4xx is no error", method: "GET", target: "/v1/sessions/abc",
			wantName: "GET /v1/sessions/:id", wantRoute: "/v1/sessions/:id", wantStatus: 404},
		{name: "5xx is an error", method: "GET", target: "/v1/models",
			wantName: "GET /v1/models", wantRoute: "/v1/models", wantStatus: 502, wantError: true},
		{name: "no route", method: "GET", target: "/nope",
			wantName: "GET", wantStatus: 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			var seen trace.SpanContext
			router := newTracedRouter(tp, &seen)

			req := httptest.NewRequest(tt.method, "http://gw.example:8080"+tt.target, nil)
			req.Header.Set("User-Agent", "openai-python/1.0")
			if tt.traceparent != "" {
				req.Header.Set("traceparent", tt.traceparent)
			}
			w := httptest.NewRecorder()
			router.ServeHTTP(w, req)

			var server sdktrace.ReadOnlySpan
			for _, s := range rec.Ended() {
				if s.SpanKind() == trace.SpanKindServer {
					if server != nil {
						t.Fatal("two server spans for one request")
					}
					server = s
				}
			}
			if server == nil {
				t.Fatal("no server span recorded")
			}
			if server.Name() != tt.wantName {
				t.Errorf("span name = %q, want %q", server.Name(), tt.wantName)
			}
			sc := server.SpanContext()
			if tt.traceparent != "" {
				if sc.TraceID().String() != clientTrace || server.Parent().SpanID().String() != clientSpan || !server.Parent().IsRemote() {
					t.Errorf("span trace %s parent %s, want trace %s parent %s (remote)",
						sc.TraceID(), server.Parent().SpanID(), clientTrace, clientSpan)
				}
			} else if server.Parent().IsValid() {
				t.Errorf("span has parent %s without a traceparent", server.Parent().SpanID())
			}
			if tt.wantRoute != "" && !seen.Equal(sc) {
				t.Errorf("handler saw span %s, want the server span %s", seen.SpanID(), sc.SpanID())
			}
			if tt.wantRoute != "" {
				// The handler's own span is a child of the server span.
				for _, s := range rec.Ended() {
					if s.Name() == "invoke_agent triage" && s.Parent().SpanID() != sc.SpanID() {
						t.Errorf("handler span parent = %s, want %s", s.Parent().SpanID(), sc.SpanID())
					}
				}
			}

			attrs := map[attribute.Key]attribute.Value{}
			for _, kv := range server.Attributes() {
				attrs[kv.Key] = kv.Value
			}
			wantAttrs := map[attribute.Key]attribute.Value{
				"http.request.method":       attribute.StringValue(tt.method),
				"url.path":                  attribute.StringValue(tt.target),
				"http.response.status_code": attribute.IntValue(tt.wantStatus),
				"server.address":            attribute.StringValue("gw.example"),
				"server.port":               attribute.IntValue(8080),
				"client.address":            attribute.StringValue("192.0.2.1"),
				"user_agent.original":       attribute.StringValue("openai-python/1.0"),
			}
			if tt.wantRoute != "" {
				wantAttrs["http.route"] = attribute.StringValue(tt.wantRoute)
			}
			for k, want := range wantAttrs {
				if got, ok := attrs[k]; !ok || got != want {
					t.Errorf("attribute %s = %v, want %v", k, got.String(), want.String())
				}
			}
			if _, ok := attrs["http.route"]; ok && tt.wantRoute == "" {
				t.Error("http.route set for an unmatched route")
			}
			if got := server.Status().Code == codes.Error; got != tt.wantError {
				t.Errorf("error status = %v, want %v", got, tt.wantError)
			}
		})
	}
}

func TestServerMiddlewareSkipsProbes(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	var seen trace.SpanContext
	router := newTracedRouter(tp, &seen)
	w := httptest.NewRecorder()
	router.ServeHTTP(w, httptest.NewRequest("GET", "/healthz", nil))
	if w.Code != http.StatusOK {
		t.Fatalf("status = %d", w.Code)
	}
	for _, s := range rec.Ended() {
		if s.SpanKind() == trace.SpanKindServer {
			t.Errorf("server span %q recorded for /healthz", s.Name())
		}
	}
}

func TestServerMiddlewarePanicIsError(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	r := gin.New()
	r.Use(gin.CustomRecoveryWithWriter(io.Discard, func(c *gin.Context, _ any) { c.AbortWithStatus(http.StatusInternalServerError) }))
	r.Use(ServerMiddleware(tp, testPropagator))
	r.GET("/boom", func(*gin.Context) { panic("boom") })
	w := httptest.NewRecorder()
	r.ServeHTTP(w, httptest.NewRequest("GET", "/boom", nil))
	if w.Code != http.StatusInternalServerError {
		t.Fatalf("status = %d, want 500", w.Code)
	}
	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("got %d spans, want 1", len(spans))
	}
	if spans[0].Status().Code != codes.Error {
		t.Errorf("span status = %v, want Error", spans[0].Status())
	}
}

func TestServerMiddlewareNoopProvider(t *testing.T) {
	var seen trace.SpanContext
	router := newTracedRouter(noop.NewTracerProvider(), &seen)
	req := httptest.NewRequest("POST", "/v1/chat/completions", nil)
	req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	w := httptest.NewRecorder()
	router.ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		t.Fatalf("status = %d", w.Code)
	}
	// With tracing off the middleware does not even extract the header.
	if seen.IsValid() {
		t.Errorf("handler saw span context %v with tracing off", seen)
	}
}

func TestServerMiddlewareUnsampledParent(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	var seen trace.SpanContext
	router := newTracedRouter(tp, &seen)
	req := httptest.NewRequest("POST", "/v1/chat/completions", nil)
	// The client decided not to sample this trace: the default parent-based
	// sampler follows it, so nothing is recorded, but the trace id carries on.
	req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")
	router.ServeHTTP(httptest.NewRecorder(), req)
	if n := len(rec.Ended()); n != 0 {
		t.Errorf("recorded %d spans for an unsampled trace", n)
	}
	if seen.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("handler trace id = %s, want the client's", seen.TraceID())
	}
}
