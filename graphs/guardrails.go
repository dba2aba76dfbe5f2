package graphs

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Guardrails (README, Guardrails): named checks of a run's input and of what its
// agents say, listed by graphs and agents. Each is one of three kinds of
// judge: a regex, a webhook or a model.

// Defaults of a guardrail.
const (
	DefaultGuardrailMessage     = "I can't help with that request."
	DefaultGuardrailHTTPTimeout = 5 * time.Second
)

// rawGuardrail is one entry of the top-level `guardrails:`. Exactly one of
// Regex, HTTP and Model is set.
type rawGuardrail struct {
	// Regex is an RE2 pattern; the guardrail trips when the text matches.
	Regex *string `yaml:"regex"`
	// HTTP is a webhook POSTed the text, answering {"tripwire", "reason"};
	// its timeout defaults to 5s.
	HTTP *rawHTTP `yaml:"http"`
	// Model is the "provider/model" of an LLM judge.
	Model string `yaml:"model"`
	// Instructions are the model judge's system prompt; default empty.
	Instructions string `yaml:"instructions"`
	// Message is the reply when the guardrail trips; default
	// DefaultGuardrailMessage.
	Message string `yaml:"message"`
	// FailOpen lets a run go on when the judge fails; default false: a
	// judge that errors trips the guardrail.
	FailOpen bool `yaml:"fail_open"`
}

// GuardrailKind says which judge a guardrail uses.
type GuardrailKind string

// The guardrail kinds.
const (
	GuardrailRegex GuardrailKind = "regex"
	GuardrailHTTP  GuardrailKind = "http"
	GuardrailModel GuardrailKind = "model"
)

// Guardrail is one compiled guardrail: a small tagged union by Kind.
type Guardrail struct {
	Name string
	Kind GuardrailKind
	// Regex is set when Kind is GuardrailRegex.
	Regex *regexp.Regexp
	// HTTP is set when Kind is GuardrailHTTP (its Timeout defaults to
	// DefaultGuardrailHTTPTimeout).
	HTTP *HTTPTool
	// Model and Instructions are set when Kind is GuardrailModel.
	Model        ModelRef
	Instructions string
	// Message is the reply of a run the guardrail stopped.
	Message string
	// FailOpen: a judge that fails lets the text pass instead of tripping.
	FailOpen bool
}

// compileGuardrails compiles `guardrails:`.
func compileGuardrails(raw map[string]rawGuardrail, providers map[string]Provider, p *problems) map[string]*Guardrail {
	if len(raw) == 0 {
		return nil
	}
	out := make(map[string]*Guardrail, len(raw))
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		r := raw[name]
		subject := fmt.Sprintf("guardrail %q", name)
		if name == "" || hasControl(name) {
			p.addf("%s: a guardrail name must be non-empty and printable", subject)
		}
		g := &Guardrail{Name: name, Instructions: r.Instructions, Message: r.Message, FailOpen: r.FailOpen}
		if g.Message == "" {
			g.Message = DefaultGuardrailMessage
		}
		var kinds []string
		if r.Regex != nil {
			kinds = append(kinds, "regex")
			g.Kind = GuardrailRegex
			re, err := regexp.Compile(*r.Regex)
			if err != nil {
				p.addf("%s: regex %q is not RE2: %v", subject, *r.Regex, err)
			}
			g.Regex = re
		}
		if r.HTTP != nil {
			kinds = append(kinds, "http")
			g.Kind = GuardrailHTTP
			g.HTTP = &HTTPTool{URL: r.HTTP.URL, Timeout: duration(r.HTTP.Timeout, DefaultGuardrailHTTPTimeout, subject+": http.timeout", p)}
			if r.HTTP.URL == "" {
				p.addf("%s: http.url is required", subject)
			} else {
				checkURL(r.HTTP.URL, subject+": http.url", p)
			}
		}
		if r.Model != "" {
			kinds = append(kinds, "model")
			g.Kind = GuardrailModel
			prov, model, ok := strings.Cut(r.Model, "/")
			_, known := providers[prov]
			switch {
			case !ok || prov == "" || model == "":
				p.addf("%s: model %q must be \"provider/model\", e.g. openai/gpt-4o-mini", subject, r.Model)
			case !known:
				p.addf("%s: model %q: unknown provider %q (known: %s)", subject, r.Model, prov,
					strings.Join(slices.Sorted(maps.Keys(providers)), ", "))
			}
			g.Model = ModelRef{Provider: prov, Model: model}
		}
		switch len(kinds) {
		case 0:
			p.addf("%s: needs one of regex, http or model", subject)
		case 1:
		default:
			p.addf("%s: has %s; a guardrail is exactly one of regex, http or model", subject, strings.Join(kinds, " and "))
		}
		out[name] = g
	}
	return out
}

// compileGuardrailLists resolves the input_guardrails and output_guardrails
// of graphs and agents.
func compileGuardrailLists(raw *rawConfig, agents map[string]*Agent, graphs map[string]*Graph, known map[string]*Guardrail, p *problems) {
	for _, name := range slices.Sorted(maps.Keys(raw.Agents)) {
		a := agents[name]
		if a == nil {
			continue
		}
		subject := fmt.Sprintf("agent %q", name)
		a.InputGuardrails = guardrailList(raw.Agents[name].InputGuardrails, known, subject+": input_guardrails", p)
		a.OutputGuardrails = guardrailList(raw.Agents[name].OutputGuardrails, known, subject+": output_guardrails", p)
	}
	for _, name := range slices.Sorted(maps.Keys(raw.Graphs)) {
		g := graphs[name]
		if g == nil {
			continue
		}
		subject := fmt.Sprintf("graph %q", name)
		g.InputGuardrails = guardrailList(raw.Graphs[name].InputGuardrails, known, subject+": input_guardrails", p)
		g.OutputGuardrails = guardrailList(raw.Graphs[name].OutputGuardrails, known, subject+": output_guardrails", p)
	}
}

// guardrailList resolves one list of guardrail names.
func guardrailList(names []string, known map[string]*Guardrail, path string, p *problems) []*Guardrail {
	var out []*Guardrail
	listed := map[string]bool{}
	for _, n := range names {
		g, ok := known[n]
		switch {
		case !ok:
			p.addf("%s: unknown guardrail %q (define it under `guardrails:`)", path, n)
			continue
		case listed[n]:
			p.addf("%s: guardrail %q is listed twice", path, n)
			continue
		}
		listed[n] = true
		out = append(out, g)
	}
	return out
}

// HasGuardrails reports whether any run of g is checked by a guardrail:
// the graph's own or one of its agents'.
func (g *Graph) HasGuardrails() bool {
	if len(g.InputGuardrails)+len(g.OutputGuardrails) > 0 {
		return true
	}
	seen := map[*Agent]bool{}
	for _, a := range g.Agents {
		if len(a.InputGuardrails)+len(a.OutputGuardrails) > 0 || subagentGuarded(a, seen) {
			return true
		}
	}
	return false
}

// subagentGuarded reports whether a sub-agent a asks, or one those ask,
// has output guardrails: on a stream its text reaches the client.
func subagentGuarded(a *Agent, seen map[*Agent]bool) bool {
	for _, t := range a.Subagents {
		if t.Agent == nil {
			continue
		}
		sub := t.Agent.Agent
		if sub == nil || seen[sub] {
			continue
		}
		seen[sub] = true
		if len(sub.OutputGuardrails) > 0 || subagentGuarded(sub, seen) {
			return true
		}
	}
	return false
}
