package graphs

import (
	"strings"
	"testing"
	"time"
)

func TestGuardrailsCompile(t *testing.T) {
	s := mustParse(t, `
guardrails:
  cards: {regex: '\d{16}', message: No cards.}
  policy: {http: {url: "http://127.0.0.1:7000/check"}, fail_open: true}
  jailbreak: {model: openai/gpt-4o-mini, instructions: Judge it.}
agents:
  triage: {model: openai/m, input_guardrails: [policy], output_guardrails: [cards]}
graphs:
  support: {lead: triage, input_guardrails: [jailbreak, policy], output_guardrails: [cards]}`, nil)
	g := s.Graphs["support"]
	if len(g.InputGuardrails) != 2 || g.InputGuardrails[0].Name != "jailbreak" || g.InputGuardrails[1].Name != "policy" {
		t.Fatalf("graph input guardrails %+v", g.InputGuardrails)
	}
	if !g.HasGuardrails() || len(g.Lead.InputGuardrails) != 1 || len(g.Lead.OutputGuardrails) != 1 {
		t.Fatalf("agent guardrails %+v %+v", g.Lead.InputGuardrails, g.Lead.OutputGuardrails)
	}
	cards, policy, jb := s.Guardrails["cards"], s.Guardrails["policy"], s.Guardrails["jailbreak"]
	if cards.Kind != GuardrailRegex || !cards.Regex.MatchString("1234123412341234") || cards.Message != "No cards." || cards.FailOpen {
		t.Errorf("cards %+v", cards)
	}
	if policy.Kind != GuardrailHTTP || policy.HTTP.Timeout != DefaultGuardrailHTTPTimeout || !policy.FailOpen || policy.Message != DefaultGuardrailMessage {
		t.Errorf("policy %+v", policy)
	}
	if jb.Kind != GuardrailModel || jb.Model != (ModelRef{Provider: "openai", Model: "gpt-4o-mini"}) || jb.Instructions != "Judge it." {
		t.Errorf("jailbreak %+v", jb)
	}
	if p := mustParse(t, "guardrails: {p: {http: {url: \"http://x/c\", timeout: 2s}}}\nagents: {a: {model: openai/m}}\ngraphs: {g: {lead: a}}", nil).Guardrails["p"]; p.HTTP.Timeout != 2*time.Second {
		t.Errorf("timeout %v", p.HTTP.Timeout)
	}
}

func TestGuardrailProblems(t *testing.T) {
	tests := []struct {
		name, yml, want string
	}{
		{"unknown name", `
agents: {triage: {model: openai/m, output_guardrails: [nope]}}
graphs: {support: {lead: triage}}`, `agent "triage": output_guardrails: unknown guardrail "nope"`},
		{"unknown name on a graph", `
agents: {triage: {model: openai/m}}
graphs: {support: {lead: triage, input_guardrails: [nope]}}`, `graph "support": input_guardrails: unknown guardrail "nope"`},
		{"bad regex", `
guardrails: {bad: {regex: '(?<=x)y'}}
agents: {triage: {model: openai/m}}
graphs: {support: {lead: triage}}`, `guardrail "bad": regex "(?<=x)y" is not RE2`},
		{"unknown provider", `
guardrails: {judge: {model: nowhere/m}}
agents: {triage: {model: openai/m}}
graphs: {support: {lead: triage}}`, `guardrail "judge": model "nowhere/m": unknown provider "nowhere"`},
		{"no kind", `
guardrails: {empty: {message: hi}}
agents: {triage: {model: openai/m}}
graphs: {support: {lead: triage}}`, `guardrail "empty": needs one of regex, http or model`},
		{"two kinds", `
guardrails: {both: {regex: x, model: openai/m}}
agents: {triage: {model: openai/m}}
graphs: {support: {lead: triage}}`, `guardrail "both": has regex and model; a guardrail is exactly one of regex, http or model`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := problemsOf(t, tc.yml, nil)
			if len(got) != 1 || !strings.Contains(got[0], tc.want) {
				t.Errorf("problems %q, want one containing %q", got, tc.want)
			}
		})
	}
}
