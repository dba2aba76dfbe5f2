package telemetry

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/switchboard-ai/switchboard/graphs"
)

func TestSetupWithoutEndpointIsNoop(t *testing.T) {
	tr, err := Setup(context.Background(), graphs.Telemetry{ServiceName: "switchboard"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("Setup: %v", err)
	}
	if tr.Enabled() {
		t.Error("Enabled() = true without an endpoint")
	}
	_, span := tr.Provider.Tracer("test").Start(context.Background(), "op")
	if span.IsRecording() {
		t.Error("span from the no-op provider is recording")
	}
	span.End()
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

func TestSetupRejectsBadEndpoint(t *testing.T) {
	for _, endpoint := range []string{"127.0.0.1:4318", "ftp://collector:4318", "http://", "http://[::1"} {
		t.Run(endpoint, func(t *testing.T) {
			tr, err := Setup(context.Background(), graphs.Telemetry{OTLPEndpoint: endpoint}, nil)
			if err == nil {
				_ = tr.Shutdown(context.Background())
				t.Fatalf("Setup(%q) succeeded, want an error", endpoint)
			}
		})
	}
}

func TestTracesURL(t *testing.T) {
	tests := []struct{ base, want string }{
		{"http://127.0.0.1:4318", "http://127.0.0.1:4318/v1/traces"},
		{"http://127.0.0.1:4318/", "http://127.0.0.1:4318/v1/traces"},
		{"https://otel.example.com/otlp", "https://otel.example.com/otlp/v1/traces"},
		{"https://otel.example.com/otlp/", "https://otel.example.com/otlp/v1/traces"},
		{"http://127.0.0.1:4318/v1/traces", "http://127.0.0.1:4318/v1/traces"},
		{" http://localhost:4318 ", "http://localhost:4318/v1/traces"},
	}
	for _, tt := range tests {
		got, err := tracesURL(tt.base)
		if err != nil {
			t.Errorf("tracesURL(%q): %v", tt.base, err)
			continue
		}
		if got != tt.want {
			t.Errorf("tracesURL(%q) = %q, want %q", tt.base, got, tt.want)
		}
	}
}

// fakeCollector is an OTLP/HTTP receiver that keeps the spans it is sent.
type fakeCollector struct {
	mu       sync.Mutex
	paths    []string
	resource []*commonpb.KeyValue
	spans    []*tracepb.Span
}

func (f *fakeCollector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.paths = append(f.paths, r.Method+" "+r.URL.Path)
	for _, rs := range req.GetResourceSpans() {
		f.resource = rs.GetResource().GetAttributes()
		for _, ss := range rs.GetScopeSpans() {
			f.spans = append(f.spans, ss.GetSpans()...)
		}
	}
	f.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func TestSetupExportsToCollectorOnShutdown(t *testing.T) {
	col := &fakeCollector{}
	srv := httptest.NewServer(col)
	defer srv.Close()

	// A trailing slash on the base URL must not change the path.
	tr, err := Setup(context.Background(), graphs.Telemetry{ServiceName: "sb-test", OTLPEndpoint: srv.URL + "/"}, nil)
	if err != nil {
		t.Fatalf("Setup: %v", err)
	}
	if !tr.Enabled() {
		t.Fatal("Enabled() = false with an endpoint")
	}
	tracer := tr.Provider.Tracer("test")
	ctx, parent := tracer.Start(context.Background(), "invoke_agent triage")
	_, child := tracer.Start(ctx, "chat gpt-4o-mini", trace.WithAttributes(attribute.Int("gen_ai.usage.input_tokens", 12)))
	child.End()
	parent.End()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}

	col.mu.Lock()
	defer col.mu.Unlock()
	if diff := cmp.Diff([]string{"POST /v1/traces"}, col.paths); diff != "" {
		t.Errorf("collector requests (-want +got):\n%s", diff)
	}
	var names []string
	byName := map[string]*tracepb.Span{}
	for _, s := range col.spans {
		names = append(names, s.GetName())
		byName[s.GetName()] = s
	}
	if diff := cmp.Diff([]string{"chat gpt-4o-mini", "invoke_agent triage"}, names); diff != "" {
		t.Fatalf("exported spans (-want +got):\n%s", diff)
	}
	p, c := byName["invoke_agent triage"], byName["chat gpt-4o-mini"]
	if string(c.GetParentSpanId()) != string(p.GetSpanId()) || string(c.GetTraceId()) != string(p.GetTraceId()) {
		t.Error("chat span is not a child of the invoke_agent span")
	}
	if got := attrValue(c.GetAttributes(), "gen_ai.usage.input_tokens"); got.GetIntValue() != 12 {
		t.Errorf("gen_ai.usage.input_tokens = %v, want 12", got)
	}
	if got := attrValue(col.resource, "service.name").GetStringValue(); got != "sb-test" {
		t.Errorf("resource service.name = %q, want sb-test", got)
	}
}

// failedExportLogs sets tracing up for endpoint, where nothing listens,
// ends one span and shuts down, and returns what was logged.
func failedExportLogs(t *testing.T, endpoint string) string {
	t.Helper()
	var logs bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{mu: &mu, w: &logs}, nil))
	tr, err := Setup(context.Background(), graphs.Telemetry{OTLPEndpoint: endpoint}, logger)
	if err != nil {
		t.Fatalf("Setup: %v", err)
	}
	_, span := tr.Provider.Tracer("test").Start(context.Background(), "lost")
	span.End()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	return logs.String()
}

// closedHost is the host:port of a server that is closed: nothing
// listens there any more.
func closedHost() string {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	return strings.TrimPrefix(srv.URL, "http://")
}

func TestExportFailureIsLogged(t *testing.T) {
	url := "http://" + closedHost()
	if got := failedExportLogs(t, url); !strings.Contains(got, "trace export failed") || !strings.Contains(got, url+"/v1/traces") {
		t.Errorf("log does not report the failed export to %s:\n%s", url, got)
	}
}

// A collector's URL with a password is logged masked, at start and when
// an export fails (CONTRACT §14).
func TestEndpointPasswordIsMaskedInLogs(t *testing.T) {
	host := closedHost()
	got := failedExportLogs(t, "http://u:pw-secret-1@"+host)
	masked := "u:xxxxx@" + host + "/v1/traces"
	if strings.Contains(got, "pw-secret-1") || !strings.Contains(got, "tracing enabled") || !strings.Contains(got, "trace export failed") || strings.Count(got, masked) < 2 {
		t.Errorf("logs:\n%s", got)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func attrValue(kvs []*commonpb.KeyValue, key string) *commonpb.AnyValue {
	for _, kv := range kvs {
		if kv.GetKey() == key {
			return kv.GetValue()
		}
	}
	return nil
}
