package graphs

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// ignoreSchema leaves compiled schemas out of cmp; tests check them by
// validating instances instead.
var ignoreSchema = cmpopts.IgnoreFields(Handoff{}, "Schema")

func TestLoadFileContractExample(t *testing.T) {
	env := map[string]string{"ACME_KEY": "acme-secret", "OPENAI_API_KEY": "sk-test"}
	s, err := LoadFile("testdata/contract.yaml", testBuiltin(), envOf(env))
	if err != nil {
		t.Fatalf("LoadFile: %v", err)
	}

	lookup := &Tool{
		Name:        "lookup_charges",
		Description: "Lists the user's recent charges",
		Parameters:  json.RawMessage(`{"type":"object","properties":{}}`),
		Kind:        ToolHTTP,
		HTTP:        &HTTPTool{URL: "http://127.0.0.1:7000/charges", Timeout: 5 * time.Second},
	}
	triage := &Agent{
		Name:         "triage",
		Description:  "Routes the user to the right desk",
		Instructions: "Route the user ...",
		Models:       []ModelRef{{Provider: "openai", Model: "gpt-4o-mini"}},
		Tools:        []*Tool{lookup},
	}
	billing := &Agent{
		Name:         "billing",
		Description:  "Answers questions about invoices and charges",
		Instructions: "Help with billing.",
		Models:       []ModelRef{{Provider: "openrouter", Model: "openai/gpt-4o-mini"}},
		Tools:        []*Tool{lookup},
	}
	refunds := &Agent{
		Name:         "refunds",
		Description:  "Issues refunds",
		Instructions: "Issue refunds.",
		Models:       []ModelRef{{Provider: "openai", Model: "gpt-4o-mini"}},
	}
	triage.Handoffs = []*Handoff{
		{
			Target:      billing,
			ToolName:    "transfer_to_billing",
			Description: "Answers questions about invoices and charges",
			Parameters:  json.RawMessage(`{"type":"object","properties":{"reason":{"type":"string"}}}`),
			ArgOrder:    []string{"reason"},
		},
		{
			Target:      refunds,
			ToolName:    "escalate_refund",
			Description: "Hand off when the user asks for money back",
			Parameters:  json.RawMessage(`{"type":"object","properties":{"orderId":{"type":"string"}},"required":["orderId"]}`),
			ArgOrder:    []string{"orderId"},
			Filters:     []Filter{{Kind: FilterRemoveToolCalls}},
			EnabledWhen: &Condition{Metadata: map[string]string{"plan": "pro"}},
			OnHandoff:   &Hook{URL: "http://127.0.0.1:7000/hook", Timeout: 2 * time.Second},
		},
	}
	billing.Handoffs = []*Handoff{{
		Target:      triage,
		ToolName:    "transfer_to_triage",
		Description: "Routes the user to the right desk",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"reason":{"type":"string"}}}`),
		ArgOrder:    []string{"reason"},
	}}
	want := &Set{
		Server: Server{
			Listen:        "127.0.0.1:8080",
			SessionHeader: "X-Session-Id",
			MaxBodyBytes:  4 << 20,
			APIKeys:       []APIKey{{Name: "acme", Key: "acme-secret"}},
			DrainTimeout:  30 * time.Second,
			IdleTimeout:   60 * time.Second, ReadTimeout: 30 * time.Second, StreamWriteTimeout: 30 * time.Second,
		},
		Store: Store{URL: "memory://", SessionTTL: 24 * time.Hour, Timeout: 2 * time.Second, LockLease: 30 * time.Second,
			MaxSessionBytes: 16 << 20},
		Telemetry: Telemetry{ServiceName: "switchboard"},
		Providers: map[string]Provider{
			"openai":     {Name: "openai", Kind: "openai", BaseURL: "https://api.openai.com/v1", APIKey: "sk-test", Timeout: 120 * time.Second},
			"openrouter": {Name: "openrouter", Kind: "openai", BaseURL: "https://openrouter.ai/api/v1", Timeout: 120 * time.Second, Headers: map[string]string{"X-Title": "switchboard"}},
			"ollama":     {Name: "ollama", Kind: "openai", BaseURL: "http://127.0.0.1:11434/v1", Timeout: 300 * time.Second},
			"demo":       {Name: "demo", Kind: "demo", Timeout: 120 * time.Second},
		},
		Graphs: map[string]*Graph{"support": {
			Name:                "support",
			Description:         "Customer support desk",
			Lead:                triage,
			Agents:              map[string]*Agent{"triage": triage, "billing": billing, "refunds": refunds},
			MaxHandoffs:         5,
			MaxSteps:            20,
			MaxToolCallsPerTurn: 64, ToolConcurrency: 8, ApprovalTTL: 24 * time.Hour,
		}},
		GraphNames: []string{"support"},
	}
	if diff := cmp.Diff(want, s, ignoreSchema); diff != "" {
		t.Errorf("compiled set mismatch (-want +got):\n%s", diff)
	}

	g := s.Graphs["support"]
	if g.Agents["triage"].Handoffs[0].Target != g.Agents["billing"] || g.Agents["billing"].Handoffs[0].Target != g.Lead {
		t.Error("handoff targets are not the graph's agents")
	}
	escalate := g.Lead.Handoffs[1].Schema
	if err := escalate.Validate(mustJSON(t, `{"orderId": "A1"}`)); err != nil {
		t.Errorf("escalate_refund schema rejects valid args: %v", err)
	}
	if err := escalate.Validate(mustJSON(t, `{"reason": "x"}`)); err == nil {
		t.Error("escalate_refund schema accepts args without the required orderId")
	}

	var out bytes.Buffer
	Describe(&out, s)
	checkGolden(t, "contract.describe.golden", out.String())
}

func mustJSON(t *testing.T, s string) any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestDefaults(t *testing.T) {
	s := mustParse(t, `
agents:
  solo: {model: demo/echo}
graphs:
  chat: {lead: solo}
`, nil)
	wantServer := Server{Listen: "127.0.0.1:8080", SessionHeader: "X-Session-Id", MaxBodyBytes: 4 << 20, DrainTimeout: 30 * time.Second,
		IdleTimeout: 60 * time.Second, ReadTimeout: 30 * time.Second, StreamWriteTimeout: 30 * time.Second}
	if diff := cmp.Diff(wantServer, s.Server); diff != "" {
		t.Errorf("server (-want +got):\n%s", diff)
	}
	wantStore := Store{URL: "memory://", SessionTTL: 24 * time.Hour, Timeout: 2 * time.Second, LockLease: 30 * time.Second, MaxSessionBytes: 16 << 20}
	if diff := cmp.Diff(wantStore, s.Store); diff != "" {
		t.Errorf("store (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(Telemetry{ServiceName: "switchboard"}, s.Telemetry); diff != "" {
		t.Errorf("telemetry (-want +got):\n%s", diff)
	}
	g := s.Graphs["chat"]
	if g.MaxHandoffs != 5 || g.MaxSteps != 20 {
		t.Errorf("limits = %d, %d; want 5, 20", g.MaxHandoffs, g.MaxSteps)
	}
	if got := s.Providers["openai"].Timeout; got != 120*time.Second {
		t.Errorf("provider timeout = %v; want 120s", got)
	}
}

func TestSettings(t *testing.T) {
	s := mustParse(t, `
server:
  listen: 0.0.0.0:9000
  session_header: X-Conversation
  passthrough: true
  max_body_bytes: 1024
  drain_timeout: 5s
  idle_timeout: 5s
  read_timeout: 2s
  stream_write_timeout: 3s
store: {url: "redis://127.0.0.1:6379/0", session_ttl: 1h, timeout: 500ms, lock_lease: 10s, max_session_bytes: 4096}
telemetry: {service_name: gw, otlp_endpoint: "http://127.0.0.1:4318", capture_content: true}
tools:
  t1: {http: {url: "http://x/t1"}}
agents:
  solo: {model: demo/echo, tools: [t1]}
graphs:
  chat: {lead: solo, max_handoffs: 2, max_steps: 7}
`, nil)
	want := Server{Listen: "0.0.0.0:9000", SessionHeader: "X-Conversation", Passthrough: true, MaxBodyBytes: 1024, DrainTimeout: 5 * time.Second,
		IdleTimeout: 5 * time.Second, ReadTimeout: 2 * time.Second, StreamWriteTimeout: 3 * time.Second}
	if diff := cmp.Diff(want, s.Server); diff != "" {
		t.Errorf("server (-want +got):\n%s", diff)
	}
	wantStore := Store{URL: "redis://127.0.0.1:6379/0", SessionTTL: time.Hour, Timeout: 500 * time.Millisecond, LockLease: 10 * time.Second, MaxSessionBytes: 4096}
	if diff := cmp.Diff(wantStore, s.Store); diff != "" {
		t.Errorf("store (-want +got):\n%s", diff)
	}
	wantTel := Telemetry{ServiceName: "gw", OTLPEndpoint: "http://127.0.0.1:4318", CaptureContent: true}
	if diff := cmp.Diff(wantTel, s.Telemetry); diff != "" {
		t.Errorf("telemetry (-want +got):\n%s", diff)
	}
	if g := s.Graphs["chat"]; g.MaxHandoffs != 2 || g.MaxSteps != 7 {
		t.Errorf("limits = %d, %d; want 2, 7", g.MaxHandoffs, g.MaxSteps)
	}
	tool := s.Graphs["chat"].Lead.Tools[0]
	if tool.HTTP.Timeout != 30*time.Second || string(tool.Parameters) != `{"type":"object","properties":{}}` {
		t.Errorf("tool defaults = %v, %s", tool.HTTP.Timeout, tool.Parameters)
	}
}

func TestLoadFileErrors(t *testing.T) {
	_, err := LoadFile("testdata/does-not-exist.yaml", testBuiltin(), envOf(nil))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: err = %v; want fs.ErrNotExist", err)
	}
	var ce *ConfigError
	if errors.As(err, &ce) {
		t.Errorf("missing file reported as an invalid config: %v", err)
	}
}

func TestConfigErrorText(t *testing.T) {
	problems := problemsOf(t, `
agents:
  triage: {model: nope/x, tools: [missing]}
graphs: {support: {lead: triage}}
`, nil)
	err := &ConfigError{Problems: problems}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 2 {
		t.Fatalf("Error() has %d lines, want 2:\n%s", len(lines), err)
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "config invalid: ") {
			t.Errorf("line %q lacks the prefix", l)
		}
	}
}
