package webhooks

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/internal/testenv"
	"github.com/switchboard-ai/switchboard/runtime"
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
		case "/big":
			_, _ = io.WriteString(w, strings.Repeat("x", maxResultBytes+1))
		case "/full":
			_, _ = io.WriteString(w, strings.Repeat("x", maxResultBytes))
		case "/slow":
			time.Sleep(500 * time.Millisecond)
		default:
			http.Error(w, "no such charges", http.StatusNotFound)
		}
	}))
	defer srv.Close()
	c := New(propagation.TraceContext{})
	run := func(ctx context.Context, path string, timeout time.Duration, args string) (string, error) {
		tool := &graphs.Tool{Name: "t", Kind: graphs.ToolHTTP, HTTP: &graphs.HTTPTool{URL: srv.URL + path, Timeout: timeout}}
		return c.Run(ctx, &runtime.ToolInvocation{Tool: tool, Call: runtime.ToolCall{Function: runtime.FunctionCall{Name: "t", Arguments: args}}})
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)

	out, err := run(ctx, "/ok", time.Second, `{"month":"May"}`)
	gotBody, gotTrace := got()
	if err != nil || out != `{"charges":[1]}` || gotBody != `{"month":"May"}` {
		t.Errorf("ok: %q %v, sent %q", out, err, gotBody)
	}
	if !strings.Contains(gotTrace, "01000000000000000000000000000000") {
		t.Errorf("trace context not propagated: %q", gotTrace)
	}
	_, err = run(ctx, "/ok", time.Second, "")
	if gotBody, _ := got(); err != nil || gotBody != "{}" {
		t.Errorf("empty arguments: %v, sent %q", err, gotBody)
	}
	if _, err := run(ctx, "/missing", time.Second, "{}"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("404: %v", err)
	}
	// A timeout says so, and keeps its cause for errors.Is.
	if _, err := run(ctx, "/slow", 50*time.Millisecond, "{}"); err == nil || !strings.Contains(err.Error(), "no answer within") || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("timeout: %v", err)
	}
	// A result over 1 MiB is an error, not a result cut short; 1 MiB is fine.
	if out, err := run(ctx, "/big", time.Second, "{}"); !errors.Is(err, runtime.ErrResultTooLarge) || out != "" {
		t.Errorf("over 1 MiB: %d bytes, %v; want ErrResultTooLarge", len(out), err)
	}
	if out, err := run(ctx, "/full", time.Second, "{}"); err != nil || len(out) != maxResultBytes {
		t.Errorf("1 MiB: %d bytes, %v", len(out), err)
	}
	if _, err := run(ctx, "/ok", time.Second, "{not json"); err == nil {
		t.Error("invalid arguments accepted")
	}
	err = c.Call(ctx, &graphs.Hook{URL: srv.URL + "/ok", Timeout: time.Second}, map[string]any{"from": "a"})
	if gotBody, _ := got(); err != nil || gotBody != `{"from":"a"}` {
		t.Errorf("hook: %v, sent %q", err, gotBody)
	}
	c.http.CloseIdleConnections()
}

// A failed POST is described without its URL, which may carry credentials
// (a password, an api_key in the query), and without the connection's
// addresses: the text is the tool's result, which the model and the
// session's readers see, and a log line (CONTRACT §14). The cause stays
// for errors.Is.
func TestFailureNamesNoURL(t *testing.T) {
	closedAddr := testenv.RefusingAddr(t) // nothing listens there: connection refused
	hang := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-hang }))
	defer slow.Close()
	defer close(hang)
	c := New(nil)
	secretURL := func(hostport string) string {
		return "http://svc:t00lpass@" + hostport + "/charges?api_key=qsecret123"
	}
	for _, tt := range []struct {
		name, url, want string
		timeout         time.Duration
		cause           error
	}{
		{"refused", secretURL(closedAddr), "unreachable: connection refused", time.Second, syscall.ECONNREFUSED},
		{"timeout", secretURL(strings.TrimPrefix(slow.URL, "http://")), "no answer within 50ms", 50 * time.Millisecond, context.DeadlineExceeded},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tool := &graphs.Tool{Name: "t", Kind: graphs.ToolHTTP, HTTP: &graphs.HTTPTool{URL: tt.url, Timeout: tt.timeout}}
			_, err := c.Run(context.Background(), &runtime.ToolInvocation{Tool: tool, Call: runtime.ToolCall{Function: runtime.FunctionCall{Name: "t", Arguments: `{}`}}})
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			for _, secret := range []string{"t00lpass", "qsecret123", "127.0.0.1", "svc"} {
				if strings.Contains(msg, secret) {
					t.Errorf("error %q names %q", msg, secret)
				}
			}
			if !strings.Contains(msg, tt.want) || !errors.Is(err, tt.cause) {
				t.Errorf("error %q (%#v), want %q wrapping %v", msg, err, tt.want, tt.cause)
			}
		})
	}
}
