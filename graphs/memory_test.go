package graphs

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestMemoryDefaults(t *testing.T) {
	s := mustParse(t, `
memory:
  notes: {}
  customer_profile:
    description: Facts about the customer
    scope: [principal, metadata.customer_id]
    max_bytes: 2048
    ttl: 1h
agents:
  triage: {model: openai/m}
graphs: {support: {lead: triage, memory: [customer_profile, notes]}}`, nil)
	got := s.Graphs["support"].Memory
	want := []*MemorySlot{
		{Name: "customer_profile", Description: "Facts about the customer", Scope: []string{"principal", "metadata.customer_id"}, MaxBytes: 2048, TTL: time.Hour},
		{Name: "notes", Scope: []string{"principal", "session"}, MaxBytes: 4096, TTL: 720 * time.Hour},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("slots (-want +got):\n%s", diff)
	}
	if got[0].RememberTool() != "remember_customer_profile" || got[0].RecallTool() != "recall_customer_profile" {
		t.Errorf("tool names: %s, %s", got[0].RememberTool(), got[0].RecallTool())
	}
}

func TestMemoryProblems(t *testing.T) {
	tests := []struct {
		name string
		yml  string
		want []string
	}{
		{
			name: "unknown slot",
			yml: `
agents: {triage: {model: openai/m}}
graphs: {support: {lead: triage, memory: [profile]}}`,
			want: []string{`config invalid: graph "support": unknown memory slot "profile"`},
		},
		{
			name: "bad scope names",
			yml: `
memory: {profile: {scope: [principal, customer_id, metadata., session, session]}}
agents: {triage: {model: openai/m}}
graphs: {support: {lead: triage, memory: [profile]}}`,
			want: []string{
				`config invalid: memory slot "profile": unknown scope "customer_id" (use principal, session or metadata.<key>)`,
				`config invalid: memory slot "profile": unknown scope "metadata." (use principal, session or metadata.<key>)`,
				`config invalid: memory slot "profile": scope "session" is listed twice`,
			},
		},
		{
			name: "empty scope, bad bounds",
			yml: `
memory: {profile: {scope: [], max_bytes: 0, ttl: soon}}
agents: {triage: {model: openai/m}}
graphs: {support: {lead: triage, memory: [profile]}}`,
			want: []string{
				`config invalid: memory slot "profile": ttl: "soon" is not a duration (write e.g. "500ms", "30s", "24h")`,
				`config invalid: memory slot "profile": max_bytes must be at least 1, got 0`,
				`config invalid: memory slot "profile": scope must name at least one of principal, session, metadata.<key>`,
			},
		},
		{
			name: "bad slot name",
			yml: `
memory: {"customer profile": {}}
agents: {triage: {model: openai/m}}
graphs: {support: {lead: triage}}`,
			want: []string{`config invalid: memory slot "customer profile": the name must match ^[a-zA-Z0-9_-]{1,55}$ (its tools are remember_<slot> and recall_<slot>)`},
		},
		{
			name: "slot tool clashes with an agent's tool",
			yml: `
memory: {profile: {}}
tools:
  recall_profile: {http: {url: "http://127.0.0.1:7000/t"}}
agents:
  triage: {model: openai/m, handoffs: [billing]}
  billing: {model: openai/m, description: Billing, tools: [recall_profile]}
graphs: {support: {lead: triage, memory: [profile]}}`,
			want: []string{`config invalid: graph "support": memory slot "profile": agent "billing" already has a tool or handoff named "recall_profile"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := problemsOf(t, tt.yml, nil)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}
