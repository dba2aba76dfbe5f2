package telemetry

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-ai/switchboard/runtime"
)

// scrape serves reg like /metrics does and returns the exposition text.
func scrape(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	srv := httptest.NewServer(Handler(reg))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read /metrics: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	return string(body)
}

func TestMetricsExposition(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)

	m.Inflight(1)
	m.Inflight(1)
	m.Inflight(-1)
	m.Request("support", "", 200, 1.5)
	m.Request("support", "", 200, 0.5)
	m.Request("support", "upstream_error", 502, 0.2)
	m.Request("", "model_not_found", 404, 0.001)
	m.Overhead("support", 0.00007)
	m.Handoff("support", "triage", "billing", "accepted")
	m.Handoff("support", "triage", "refunds", "invalid_args")
	m.Handoff("support", "triage", "billing", "accepted")
	m.ModelCall("openai", "gpt-4o-mini", 0.8, runtime.Usage{PromptTokens: 100, CompletionTokens: 20, TotalTokens: 120}, false)
	m.ModelCall("openai", "gpt-4o-mini", 0.3, runtime.Usage{PromptTokens: 50, CompletionTokens: 5, TotalTokens: 55}, false)
	m.ModelCall("openai", "gpt-4o-mini", 2, runtime.Usage{}, true)
	m.ToolCall("lookup_charges", 0.02, false)
	m.ToolCall("lookup_charges", 5, true)

	body := scrape(t, reg)
	want := []string{
		`switchboard_runs_in_flight 1`,
		`switchboard_requests_total{code="",graph="support",status="200"} 2`,
		`switchboard_requests_total{code="upstream_error",graph="support",status="502"} 1`,
		`switchboard_requests_total{code="model_not_found",graph="",status="404"} 1`,
		`switchboard_request_duration_seconds_count{graph="support"} 3`,
		`switchboard_request_duration_seconds_sum{graph="support"} 2.2`,
		`switchboard_request_duration_seconds_bucket{graph="support",le="1"} 2`,
		`switchboard_overhead_seconds_bucket{graph="support",le="5e-05"} 0`,
		`switchboard_overhead_seconds_bucket{graph="support",le="0.0001"} 1`,
		`switchboard_handoffs_total{from="triage",graph="support",outcome="accepted",to="billing"} 2`,
		`switchboard_handoffs_total{from="triage",graph="support",outcome="invalid_args",to="refunds"} 1`,
		`switchboard_provider_request_duration_seconds_count{model="gpt-4o-mini",provider="openai"} 3`,
		`switchboard_provider_errors_total{model="gpt-4o-mini",provider="openai"} 1`,
		`switchboard_tokens_total{model="gpt-4o-mini",provider="openai",type="input"} 150`,
		`switchboard_tokens_total{model="gpt-4o-mini",provider="openai",type="output"} 25`,
		`switchboard_tool_calls_total{outcome="ok",tool="lookup_charges"} 1`,
		`switchboard_tool_calls_total{outcome="error",tool="lookup_charges"} 1`,
		`switchboard_tool_duration_seconds_count{tool="lookup_charges"} 2`,
	}
	lines := map[string]bool{}
	for _, l := range strings.Split(body, "\n") {
		lines[l] = true
	}
	for _, w := range want {
		if !lines[w] {
			t.Errorf("/metrics lacks %s", w)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}
}

func TestMetricsConcurrentUse(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			graph := []string{"a", "b"}[i%2]
			for range 100 {
				m.Request(graph, "", 200, 0.1)
				m.Handoff(graph, "x", "y", "accepted")
			}
		}()
	}
	wg.Wait()
	body := scrape(t, reg)
	for _, w := range []string{
		`switchboard_requests_total{code="",graph="a",status="200"} 400`,
		`switchboard_requests_total{code="",graph="b",status="200"} 400`,
		`switchboard_handoffs_total{from="x",graph="a",outcome="accepted",to="y"} 400`,
	} {
		if !strings.Contains(body, w+"\n") {
			t.Errorf("/metrics lacks %s", w)
		}
	}
}

func TestNewMetricsNilRegistry(t *testing.T) {
	m := NewMetrics(nil)
	m.Request("support", "", 200, 0.1) // records without panicking
}

func BenchmarkMetricsRequest(b *testing.B) {
	m := NewMetrics(prometheus.NewRegistry())
	b.ReportAllocs()
	for b.Loop() {
		m.Request("support", "", 200, 0.1)
		m.Overhead("support", 0.0001)
		m.Handoff("support", "triage", "billing", "accepted")
		m.ModelCall("openai", "gpt-4o-mini", 0.5, runtime.Usage{PromptTokens: 10, CompletionTokens: 2}, false)
	}
}
