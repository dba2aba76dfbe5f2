package graphs

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestModelLists(t *testing.T) {
	tests := []struct {
		name  string
		model string
		want  []ModelRef
	}{
		{"one", "openai/gpt-4o-mini", []ModelRef{{"openai", "gpt-4o-mini"}}},
		{"provider is before the first slash", "openrouter/openai/gpt-4o-mini", []ModelRef{{"openrouter", "openai/gpt-4o-mini"}}},
		{
			name:  "fallbacks in order",
			model: "[openai/gpt-4o-mini, ollama/llama3.2:3b, openrouter/meta/llama-3.1-8b]",
			want:  []ModelRef{{"openai", "gpt-4o-mini"}, {"ollama", "llama3.2:3b"}, {"openrouter", "meta/llama-3.1-8b"}},
		},
		{"block list", "\n      - demo/a\n      - demo/b", []ModelRef{{"demo", "a"}, {"demo", "b"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustParse(t, "agents:\n  solo:\n    model: "+tt.model+"\ngraphs: {chat: {lead: solo}}", nil)
			if diff := cmp.Diff(tt.want, s.Graphs["chat"].Lead.Models); diff != "" {
				t.Errorf("models (-want +got):\n%s", diff)
			}
		})
	}

	bad := []struct {
		name  string
		model string
		want  []string
	}{
		{"empty list", "[]", []string{`config invalid: agent "solo": model is required ("provider/model", e.g. openai/gpt-4o-mini)`}},
		{"nested list", "[[openai/a]]", []string{`config invalid: agent "solo": each model must be "provider/model", got a list (line 3)`}},
		{"empty model", "openai/", []string{`config invalid: agent "solo": model "openai/" must be "provider/model", e.g. openai/gpt-4o-mini`}},
		{"one bad of two", "[openai/a, nope/b]", []string{`config invalid: agent "solo": model "nope/b": unknown provider "nope" (known: demo, ollama, openai, openrouter)`}},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			got := problemsOf(t, "agents:\n  solo:\n    model: "+tt.model+"\ngraphs: {chat: {lead: solo}}", nil)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFilterLists(t *testing.T) {
	tests := []struct {
		name   string
		filter string
		want   []Filter
		bad    []string
	}{
		{name: "absent", filter: "~", want: nil},
		{name: "all", filter: "all", want: nil},
		{name: "one", filter: "last_user_message", want: []Filter{{Kind: FilterLastUserMessage}}},
		{name: "keep_last", filter: "{keep_last: 4}", want: []Filter{{Kind: FilterKeepLast, N: 4}}},
		{
			name:   "list in order",
			filter: "[remove_tool_calls, {keep_last: 4}, nest_history]",
			want:   []Filter{{Kind: FilterRemoveToolCalls}, {Kind: FilterKeepLast, N: 4}, {Kind: FilterNestHistory}},
		},
		{name: "all in a list changes nothing", filter: "[all, remove_tool_calls]", want: []Filter{{Kind: FilterRemoveToolCalls}}},
		{
			name:   "unknown",
			filter: "drop_all",
			bad:    []string{`config invalid: agent "a": handoff to "b": unknown input_filter "drop_all"; want all, remove_tool_calls, last_user_message, nest_history or {keep_last: N}`},
		},
		{
			name:   "keep_last without a count",
			filter: "keep_last",
			bad:    []string{`config invalid: agent "a": handoff to "b": input_filter keep_last needs a count: {keep_last: N}`},
		},
		{
			name:   "keep_last of zero",
			filter: "{keep_last: 0}",
			bad:    []string{`config invalid: agent "a": handoff to "b": input_filter keep_last must be a whole number of at least 1, got "0"`},
		},
		{
			name:   "unknown mapping",
			filter: "{keep_first: 2}",
			bad:    []string{`config invalid: agent "a": handoff to "b": unknown input_filter mapping at line 6; want all, remove_tool_calls, last_user_message, nest_history or {keep_last: N}`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			yml := `
agents:
  a:
    model: demo/echo
    handoffs:
      - {agent: b, input_filter: ` + tt.filter + `}
  b: {model: demo/echo, description: B}
graphs: {chat: {lead: a}}`
			if tt.bad != nil {
				if diff := cmp.Diff(tt.bad, problemsOf(t, yml, nil)); diff != "" {
					t.Errorf("problems (-want +got):\n%s", diff)
				}
				return
			}
			s := mustParse(t, yml, nil)
			if diff := cmp.Diff(tt.want, s.Graphs["chat"].Lead.Handoffs[0].Filters); diff != "" {
				t.Errorf("filters (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEnabledWhen(t *testing.T) {
	s := mustParse(t, `
server: {api_keys: [{name: acme, key: k}]}
agents:
  a:
    model: demo/echo
    handoffs:
      - {agent: b, tool_name: h1, enabled_when: {metadata: {plan: pro, seats: 3, beta: true}}}
      - {agent: b, tool_name: h2, enabled_when: {principal: acme}}
      - {agent: b, tool_name: h3, enabled_when: {metadata: {plan: pro}, principal: acme}}
      - {agent: b, tool_name: h4}
  b: {model: demo/echo, description: B}
graphs: {chat: {lead: a}}
`, nil)
	hs := s.Graphs["chat"].Lead.Handoffs
	want := []*Condition{
		{Metadata: map[string]string{"plan": "pro", "seats": "3", "beta": "true"}},
		{Principal: "acme"},
		{Metadata: map[string]string{"plan": "pro"}, Principal: "acme"},
		nil,
	}
	for i, w := range want {
		if diff := cmp.Diff(w, hs[i].EnabledWhen); diff != "" {
			t.Errorf("%s (-want +got):\n%s", hs[i].ToolName, diff)
		}
	}
	if !hs[0].EnabledWhen.Holds(map[string]string{"plan": "pro", "seats": "3", "beta": "true", "x": "y"}, "") {
		t.Error("h1 does not hold for matching metadata")
	}
	if hs[2].EnabledWhen.Holds(map[string]string{"plan": "pro"}, "other") {
		t.Error("h3 holds for the wrong principal")
	}
}

func TestHandoffDefaults(t *testing.T) {
	s := mustParse(t, `
agents:
  a:
    model: demo/echo
    handoffs:
      - Refund Agent
      - agent: Refund Agent
        tool_name: refund_with_order
        description: Own description
        input_schema:
          type: object
          properties:
            zeta: {type: string}
            alpha: {type: integer}
            mid: {type: boolean}
          required: [alpha]
  Refund Agent: {model: demo/echo, description: Issues refunds}
graphs: {chat: {lead: a}}
`, nil)
	hs := s.Graphs["chat"].Lead.Handoffs
	type view struct {
		ToolName, Description, Parameters string
		ArgOrder                          []string
	}
	got := []view{}
	for _, h := range hs {
		got = append(got, view{h.ToolName, h.Description, string(h.Parameters), h.ArgOrder})
	}
	want := []view{
		{"transfer_to_refund_agent", "Issues refunds", `{"type":"object","properties":{"reason":{"type":"string"}}}`, []string{"reason"}},
		{
			"refund_with_order", "Own description",
			`{"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"integer"},"mid":{"type":"boolean"}},"required":["alpha"]}`,
			[]string{"zeta", "alpha", "mid"},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("handoffs (-want +got):\n%s", diff)
	}
	if err := hs[1].Schema.Validate(mustJSON(t, `{"zeta": "z"}`)); err == nil {
		t.Error("schema accepts arguments without the required alpha")
	}
}

func TestProviders(t *testing.T) {
	builtin := testBuiltin()
	s := mustParse(t, `
providers:
  openai: {api_key: sk-file, timeout: 10s}
  openrouter: {headers: {HTTP-Referer: "https://example.com"}}
  local: {base_url: "http://127.0.0.1:8000/v1", headers: {X-A: b}}
agents: {solo: {model: local/qwen}}
graphs: {chat: {lead: solo}}
`, nil)
	want := map[string]Provider{
		"openai":     {Name: "openai", Kind: "openai", BaseURL: "https://api.openai.com/v1", APIKey: "sk-file", Timeout: 10 * time.Second},
		"openrouter": {Name: "openrouter", Kind: "openai", BaseURL: "https://openrouter.ai/api/v1", Timeout: 120 * time.Second, Headers: map[string]string{"X-Title": "switchboard", "HTTP-Referer": "https://example.com"}},
		"ollama":     {Name: "ollama", Kind: "openai", BaseURL: "http://127.0.0.1:11434/v1", Timeout: 300 * time.Second},
		"demo":       {Name: "demo", Kind: "demo", Timeout: 120 * time.Second},
		"local":      {Name: "local", Kind: "openai", BaseURL: "http://127.0.0.1:8000/v1", Timeout: 120 * time.Second, Headers: map[string]string{"X-A": "b"}},
	}
	if diff := cmp.Diff(want, s.Providers); diff != "" {
		t.Errorf("providers (-want +got):\n%s", diff)
	}
	// The set owns its maps: changing it leaves the caller's builtins
	// alone, and the other way round.
	s.Providers["openrouter"].Headers["X-Title"] = "changed"
	if builtin["openrouter"].Headers["X-Title"] != "switchboard" {
		t.Error("the set shares a headers map with its builtin")
	}
	s2, err := Parse([]byte("agents: {solo: {model: openrouter/x}}\ngraphs: {chat: {lead: solo}}"), builtin, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	builtin["openrouter"].Headers["X-Title"] = "later"
	if got := s2.Providers["openrouter"].Headers["X-Title"]; got != "switchboard" {
		t.Errorf("a later change to the builtin shows in the set: %q", got)
	}
}

func TestGraphsShareAgents(t *testing.T) {
	s := mustParse(t, `
agents:
  triage: {model: demo/a, description: Triage, handoffs: [billing, {agent: vip, enabled_when: {metadata: {plan: pro}}}]}
  billing: {model: demo/a, description: Billing, handoffs: [triage, refunds]}
  refunds: {model: demo/a, description: Refunds}
  vip: {model: demo/a, description: VIP}
  lonely: {model: demo/a, description: Unused}
graphs:
  support: {lead: triage}
  billing-desk: {lead: billing}
  refunds-only: {lead: refunds}
`, nil)
	names := func(g *Graph) []string { return slices.Sorted(maps.Keys(g.Agents)) }
	tests := []struct {
		graph string
		want  []string
	}{
		{"support", []string{"billing", "refunds", "triage", "vip"}},
		{"billing-desk", []string{"billing", "refunds", "triage", "vip"}},
		{"refunds-only", []string{"refunds"}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, names(s.Graphs[tt.graph])); diff != "" {
			t.Errorf("graph %s agents (-want +got):\n%s", tt.graph, diff)
		}
	}
	if diff := cmp.Diff([]string{"billing-desk", "refunds-only", "support"}, s.GraphNames); diff != "" {
		t.Errorf("GraphNames (-want +got):\n%s", diff)
	}
	support, desk := s.Graphs["support"], s.Graphs["billing-desk"]
	if support.Agents["billing"] != desk.Lead || desk.Agents["triage"] != support.Lead {
		t.Error("agents are not shared between graphs")
	}
	if support.Lead.Handoffs[0].Target.Handoffs[0].Target != support.Lead {
		t.Error("the triage <-> billing cycle does not lead back to the same agent")
	}
}
