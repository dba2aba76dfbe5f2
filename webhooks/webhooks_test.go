package webhooks

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/internal/testenv"
)

func TestMain(m *testing.M) {
	testenv.VerifyNoLeaks(m)
}

func TestRun(t *testing.T) {
	var mu sync.Mutex
	var body, traceparent string
	got := func() (string, string) { mu.Lock(); defer mu.Unlock(); return body, traceparent }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		body, traceparent = string(b), r.Header.Get("traceparent")
		mu.Unlock()
		switch r.URL.Path {
		case "/ok":
			_, _ = io.WriteString(w, `{"charges":[1]}`)
		case "/slow":
			time.Sleep(500 * time.Millisecond)
		default:
			http.Error(w, "no such charges", http.StatusNotFound)
		}
	}))
	defer srv.Close()
	c := New(propagation.TraceContext{})
	tool := func(path string, timeout time.Duration) *graphs.Tool {
		return &graphs.Tool{Name: "t", Kind: graphs.ToolHTTP, HTTP: &graphs.HTTPTool{URL: srv.URL + path, Timeout: timeout}}
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)

	out, err := c.Run(ctx, tool("/ok", time.Second), `{"month":"May"}`)
	gotBody, gotTrace := got()
	if err != nil || out != `{"charges":[1]}` || gotBody != `{"month":"May"}` {
		t.Errorf("ok: %q %v, sent %q", out, err, gotBody)
	}
	if !strings.Contains(gotTrace, "01000000000000000000000000000000") {
		t.Errorf("trace context not propagated: %q", gotTrace)
	}
	_, err = c.Run(ctx, tool("/ok", time.Second), "")
	if gotBody, _ := got(); err != nil || gotBody != "{}" {
		t.Errorf("empty arguments: %v, sent %q", err, gotBody)
	}
	if _, err := c.Run(ctx, tool("/missing", time.Second), "{}"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("404: %v", err)
	}
	if _, err := c.Run(ctx, tool("/slow", 50*time.Millisecond), "{}"); err == nil || !strings.Contains(err.Error(), "no answer within") {
		t.Errorf("timeout: %v", err)
	}
	if _, err := c.Run(ctx, tool("/ok", time.Second), "{not json"); err == nil {
		t.Error("invalid arguments accepted")
	}
	err = c.Call(ctx, &graphs.Hook{URL: srv.URL + "/ok", Timeout: time.Second}, map[string]any{"from": "a"})
	if gotBody, _ := got(); err != nil || gotBody != `{"from":"a"}` {
		t.Errorf("hook: %v, sent %q", err, gotBody)
	}
	c.http.CloseIdleConnections()
}
