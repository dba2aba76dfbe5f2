// Package tracing_test checks, against a real Jaeger, that a handoff
// conversation through the gateway is one trace in the client's trace with
// the spans of docs/spans.md. scripts/tracing-e2e.sh starts Jaeger and runs it.
package tracing_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
	"github.com/switchboard-ai/switchboard/internal/gwtest"
)

const deskYAML = `
providers:
  fake: {base_url: "${FAKE_URL}"}
telemetry:
  service_name: switchboard-e2e
  otlp_endpoint: ${JAEGER_OTLP_URL}
tools:
  lookup_charges:
    description: Lists the user's recent charges
    http: {url: "${TOOLS_URL}/charges"}
agents:
  triage:
    description: Routes the user to the right desk
    instructions: You are the triage desk.
    model: fake/gpt-4o-mini
    handoffs: [billing, tech-support]
  billing:
    description: Answers questions about charges
    instructions: You are the billing desk.
    model: fake/gpt-4o
    tools: [lookup_charges]
  tech-support:
    description: Solves technical problems
    model: fake/gpt-4o
graphs:
  support: {lead: triage}
`

// jaegerSpan is a span as Jaeger's HTTP API returns it.
type jaegerSpan struct {
	TraceID       string `json:"traceID"`
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []struct {
		RefType string `json:"refType"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	Tags []struct {
		Key   string `json:"key"`
		Value any    `json:"value"`
	} `json:"tags"`
}

func (s jaegerSpan) tag(k string) string {
	for _, t := range s.Tags {
		if t.Key == k {
			return fmt.Sprint(t.Value)
		}
	}
	return ""
}

func (s jaegerSpan) parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

func TestHandoffTraceInJaeger(t *testing.T) {
	otlp, query := os.Getenv("JAEGER_OTLP_URL"), os.Getenv("JAEGER_QUERY_URL")
	if otlp == "" || query == "" {
		t.Skip("no Jaeger: run scripts/tracing-e2e.sh (make tracing-e2e)")
	}
	fake := fakeupstream.New(t,
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{{ID: "call_h", Name: "transfer_to_billing", Arguments: `{"reason":"duplicate charge"}`}}},
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{{ID: "call_t", Name: "lookup_charges", Arguments: `{}`}}},
		fakeupstream.Reply{Text: "Refunded."},
	)
	tools := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"charges":[42,42]}`)
	}))
	defer tools.Close()
	gw := gwtest.Start(t, deskYAML, map[string]string{"FAKE_URL": fake.URL, "TOOLS_URL": tools.URL, "JAEGER_OTLP_URL": otlp})

	// A known client trace: the gateway's spans must join it.
	traceID := fmt.Sprintf("%032x", time.Now().UnixNano())
	parentID := "00f067aa0ba902b7"
	r := gw.Chat(gwtest.User("support", "I was charged twice"), map[string]string{
		"traceparent":  "00-" + traceID + "-" + parentID + "-01",
		"X-Session-Id": "trace-" + traceID[20:],
	})
	if r.Status != http.StatusOK {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	// The provider calls carried the trace on.
	for _, req := range fake.Requests() {
		if tp := req.Header.Get("traceparent"); len(tp) < 36 || tp[3:35] != traceID {
			t.Errorf("provider call without the client's trace: traceparent %q", tp)
		}
	}
	gw.Close() // flushes the batch exporter

	spans := fetchTrace(t, query, traceID, 8)
	if out := os.Getenv("TRACE_JSON_OUT"); out != "" {
		saveTrace(t, query, traceID, out)
	}
	byName := map[string][]jaegerSpan{}
	byID := map[string]jaegerSpan{}
	for _, s := range spans {
		byName[s.OperationName] = append(byName[s.OperationName], s)
		byID[s.SpanID] = s
	}
	one := func(name string) jaegerSpan {
		t.Helper()
		if len(byName[name]) != 1 {
			t.Fatalf("want one %q span, got %d; spans: %v", name, len(byName[name]), names(spans))
		}
		return byName[name][0]
	}
	server := one("POST /v1/chat/completions")
	if server.parent() != parentID {
		t.Errorf("server span's parent %q, want the client's %q", server.parent(), parentID)
	}
	triage, billing := one("invoke_agent triage"), one("invoke_agent billing")
	for _, s := range []jaegerSpan{triage, billing} {
		if s.parent() != server.SpanID || s.tag("gen_ai.operation.name") != "invoke_agent" || s.tag("gen_ai.conversation.id") == "" {
			t.Errorf("%s: parent %s tags %+v", s.OperationName, s.parent(), s.Tags)
		}
	}
	if got := triage.tag("gen_ai.agent.name"); got != "triage" {
		t.Errorf("gen_ai.agent.name %q", got)
	}
	handoff := one("handoff triage -> billing")
	want := map[string]string{
		"switchboard.handoff.from": "triage", "switchboard.handoff.to": "billing",
		"switchboard.handoff.tool_name": "transfer_to_billing", "switchboard.handoff.tool_call_id": "call_h",
		"switchboard.handoff.outcome": "accepted",
	}
	for k, v := range want {
		if got := handoff.tag(k); got != v {
			t.Errorf("handoff %s = %q, want %q", k, got, v)
		}
	}
	if handoff.parent() != triage.SpanID {
		t.Errorf("handoff span is not under invoke_agent triage")
	}
	chatMini := one("chat gpt-4o-mini")
	if chatMini.parent() != triage.SpanID || chatMini.tag("gen_ai.provider.name") != "fake" || chatMini.tag("gen_ai.request.model") != "gpt-4o-mini" || chatMini.tag("gen_ai.usage.input_tokens") != "10" {
		t.Errorf("chat span: parent %s tags %+v", chatMini.parent(), chatMini.Tags)
	}
	if n := len(byName["chat gpt-4o"]); n != 2 {
		t.Errorf("billing's chat spans: %d, want 2", n)
	}
	tool := one("execute_tool lookup_charges")
	if tool.parent() != billing.SpanID || tool.tag("gen_ai.tool.name") != "lookup_charges" || tool.tag("gen_ai.tool.call.id") != "call_t" {
		t.Errorf("tool span: parent %s tags %+v", tool.parent(), tool.Tags)
	}
	for _, s := range spans {
		// Jaeger drops the id's leading zeros.
		if strings.TrimLeft(s.TraceID, "0") != strings.TrimLeft(traceID, "0") {
			t.Errorf("span %s in trace %s", s.OperationName, s.TraceID)
		}
		// Content capture is off: no prompt or completion on any span.
		for _, tg := range s.Tags {
			if v := fmt.Sprint(tg.Value); v == "I was charged twice" || v == "Refunded." {
				t.Errorf("span %s records content in %s", s.OperationName, tg.Key)
			}
		}
	}
}

// fetchTrace polls Jaeger until the trace has at least min spans.
func fetchTrace(t *testing.T, query, traceID string, min int) []jaegerSpan {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		var body struct {
			Data []struct {
				Spans []jaegerSpan `json:"spans"`
			} `json:"data"`
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, query+"/api/traces/"+traceID, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
			if len(body.Data) == 1 && len(body.Data[0].Spans) >= min {
				return body.Data[0].Spans
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("trace %s did not reach Jaeger with %d spans", traceID, min)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// saveTrace writes the raw trace JSON, for rendering the README's picture.
func saveTrace(t *testing.T, query, traceID, path string) {
	resp, err := http.Get(query + "/api/traces/" + traceID)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func names(spans []jaegerSpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.OperationName)
	}
	return out
}
