package graphs

import (
	"errors"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// contractToolName is docs/config.md's rule for tool names, given or derived,
// written out again so that the check does not trust the code it checks.
var contractToolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// fuzzEnv holds environment values that try to smuggle in YAML structure
// or further substitutions; neither may take effect.
var fuzzEnv = map[string]string{
	"FAKE_URL":  "http://127.0.0.1:9999/v1",
	"ACME_KEY":  "sk-acme",
	"SELF":      "${SELF}",
	"STRUCTURE": "a: [b, {c: d}]\n- e",
	"NUMBER":    "42",
	"DURATION":  "250ms",
	// examples/support.yaml needs it.
	"CHARGES_URL": "http://127.0.0.1:7000/charges",
}

// FuzzParse checks that Parse never panics on arbitrary YAML and returns
// either a *ConfigError whose every problem is one "config invalid: " line,
// or a Set the gateway can rely on: every graph has its lead in its Agents,
// its Agents are exactly what the lead reaches through handoffs, every
// handoff target is among them, every model names a known provider.
//
// The seed corpus in testdata/fuzz/FuzzParse/ runs with plain `go test`;
// fuzz for longer with:
//
//	go test ./graphs -run '^$' -fuzz '^FuzzParse$' -fuzztime 10m
func FuzzParse(f *testing.F) {
	f.Add([]byte("agents: {a: {model: demo/x}}\ngraphs: {g: {lead: a}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		set, err := Parse(data, testBuiltin(), envOf(fuzzEnv))
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("error %T %v is not a *ConfigError", err, err)
			}
			if set != nil {
				t.Fatalf("returned a Set with error %v", err)
			}
			if len(ce.Problems) == 0 {
				t.Fatal("a *ConfigError without problems")
			}
			for _, p := range ce.Problems {
				if !strings.HasPrefix(p, problemPrefix) || strings.Contains(p, "\n") {
					t.Fatalf("problem %q is not one %q line", p, problemPrefix)
				}
			}
			return
		}
		checkSet(t, set)
	})
}

// checkSet fails unless set holds the invariants of a compiled config.
func checkSet(t *testing.T, set *Set) {
	t.Helper()
	if set == nil {
		t.Fatal("nil Set without error")
	}
	if len(set.Graphs) == 0 {
		t.Fatal("a valid config without graphs")
	}
	if want := slices.Sorted(maps.Keys(set.Graphs)); !slices.Equal(set.GraphNames, want) {
		t.Fatalf("GraphNames %q, want the sorted graph names %q", set.GraphNames, want)
	}
	if set.Server.MaxBodyBytes <= 0 || set.Server.SessionHeader == "" || set.Store.URL == "" {
		t.Fatalf("server or store defaults missing: %+v %+v", set.Server, set.Store)
	}
	for name, g := range set.Graphs {
		if g == nil || g.Name != name {
			t.Fatalf("graph %q: %+v", name, g)
		}
		if g.Lead == nil || g.Agents[g.Lead.Name] != g.Lead {
			t.Fatalf("graph %q: lead %v is not in its agents", name, g.Lead)
		}
		if g.MaxSteps < 1 || g.MaxHandoffs < 0 {
			t.Fatalf("graph %q: max_steps %d max_handoffs %d", name, g.MaxSteps, g.MaxHandoffs)
		}
		reached := map[string]bool{}
		var walk func(a *Agent)
		walk = func(a *Agent) {
			if reached[a.Name] {
				return
			}
			reached[a.Name] = true
			for _, h := range a.Handoffs {
				walk(h.Target)
			}
		}
		walk(g.Lead)
		if len(reached) != len(g.Agents) {
			t.Fatalf("graph %q: lead reaches %d agents, Agents holds %d", name, len(reached), len(g.Agents))
		}
		for key, a := range g.Agents {
			if a == nil || a.Name != key || !reached[key] {
				t.Fatalf("graph %q: agent %q is %+v (reached %v)", name, key, a, reached[key])
			}
			checkAgent(t, set, g, a)
		}
	}
}

// checkAgent fails unless a's models, tools and handoffs are usable.
func checkAgent(t *testing.T, set *Set, g *Graph, a *Agent) {
	t.Helper()
	if len(a.Models) == 0 {
		t.Fatalf("agent %q has no model", a.Name)
	}
	for _, m := range a.Models {
		if _, ok := set.Providers[m.Provider]; !ok || m.Model == "" {
			t.Fatalf("agent %q: model %q at an unknown provider", a.Name, m)
		}
	}
	names := map[string]bool{}
	for _, tool := range a.Tools {
		if tool == nil || !contractToolName.MatchString(tool.Name) || names[tool.Name] {
			t.Fatalf("agent %q: bad or repeated tool %+v", a.Name, tool)
		}
		names[tool.Name] = true
	}
	for _, h := range a.Handoffs {
		if h == nil || h.Target == nil || g.Agents[h.Target.Name] != h.Target {
			t.Fatalf("agent %q: handoff %+v leaves the graph", a.Name, h)
		}
		if !contractToolName.MatchString(h.ToolName) || names[h.ToolName] {
			t.Fatalf("agent %q: bad or repeated handoff tool name %q", a.Name, h.ToolName)
		}
		names[h.ToolName] = true
		if h.Description == "" || h.Schema == nil || len(h.Parameters) == 0 {
			t.Fatalf("agent %q: handoff %q lacks a description or schema", a.Name, h.ToolName)
		}
	}
}
