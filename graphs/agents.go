package graphs

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// compileAgents builds every agent of the file, whether or not a graph
// reaches it, so that a mistake in an unused agent is still reported. All
// agents are created first and filled in after, so that handoffs can point
// at any of them, cycles included.
func compileAgents(raw map[string]rawAgent, tools map[string]*Tool, providers map[string]Provider, principals map[string]bool, p *problems) map[string]*Agent {
	agents := make(map[string]*Agent, len(raw))
	for name, r := range raw {
		agents[name] = &Agent{Name: name, Description: r.Description, Instructions: r.Instructions}
	}
	c := agentCompiler{agents: agents, tools: tools, providers: providers, principals: principals, p: p}
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		c.compile(agents[name], raw[name])
	}
	checkSubagentCycles(agents, p)
	return agents
}

// agentCompiler holds what compiling one agent needs to resolve.
type agentCompiler struct {
	agents     map[string]*Agent
	tools      map[string]*Tool
	providers  map[string]Provider
	principals map[string]bool // API key names
	p          *problems
}

// compile fills in agent a from r: models, tools and handoffs, with the
// checks that need the agent's other handoffs and tools.
func (c *agentCompiler) compile(a *Agent, r rawAgent) {
	subject := fmt.Sprintf("agent %q", a.Name)
	if a.Name == "" || hasControl(a.Name) {
		c.p.addf("%s: an agent name must be non-empty and printable", subject)
	}
	a.Models = c.models(&r.Model, subject)
	a.Permissions = c.rules(r.Permissions, subject)

	listed := map[string]bool{}
	for _, name := range r.Tools {
		t, ok := c.tools[name]
		switch {
		case !ok:
			c.p.addf("%s: unknown tool %q", subject, name)
		case listed[name]:
			c.p.addf("%s: tool %q is listed twice", subject, name)
		default:
			a.Tools = append(a.Tools, t)
		}
		listed[name] = true
	}

	byToolName := map[string]string{} // tool name -> the target that uses it
	for i := range r.Handoffs {
		h, target := c.handoff(subject, &r.Handoffs[i], fmt.Sprintf("agents.%s.handoffs[%d]", a.Name, i))
		if h == nil {
			continue
		}
		where := fmt.Sprintf("%s: handoff to %q", subject, target)
		if listed[h.ToolName] {
			c.p.addf("%s: tool name %q is also the name of one of the agent's tools; give the handoff another tool_name", where, h.ToolName)
		}
		if other, dup := byToolName[h.ToolName]; dup {
			c.p.addf("%s: tool name %q is also used by its handoff to %q; give one of them another tool_name", where, h.ToolName, other)
		}
		byToolName[h.ToolName] = target
		if h.Target != nil {
			a.Handoffs = append(a.Handoffs, h)
		}
	}

	used := map[string]string{}
	for name := range listed {
		used[name] = fmt.Sprintf("its tool %q", name)
	}
	for name, target := range byToolName {
		used[name] = fmt.Sprintf("its handoff to %q", target)
	}
	c.subagents(a, r.Subagents, used)
	a.Settings = compileModelSettings(r.ModelSettings, subject, c.p)
}

// models parses `model:`, one "provider/model" or a list of them.
func (c *agentCompiler) models(n *yaml.Node, subject string) []ModelRef {
	n = deref(n)
	var items []*yaml.Node
	switch {
	case n == nil || isNull(n):
	case n.Kind == yaml.ScalarNode:
		items = []*yaml.Node{n}
	case n.Kind == yaml.SequenceNode:
		items = n.Content
	default:
		c.p.addf("%s: model must be \"provider/model\" or a list of them, got %s (line %d)", subject, describeNode(n), n.Line)
		return nil
	}
	if len(items) == 0 {
		c.p.addf("%s: model is required (\"provider/model\", e.g. openai/gpt-4o-mini)", subject)
		return nil
	}
	var refs []ModelRef
	for _, item := range items {
		if item = deref(item); item.Kind != yaml.ScalarNode || isNull(item) {
			c.p.addf("%s: each model must be \"provider/model\", got %s (line %d)", subject, describeNode(item), item.Line)
			continue
		}
		prov, model, ok := strings.Cut(item.Value, "/")
		if !ok || prov == "" || model == "" {
			c.p.addf("%s: model %q must be \"provider/model\", e.g. openai/gpt-4o-mini", subject, item.Value)
			continue
		}
		if _, known := c.providers[prov]; !known {
			c.p.addf("%s: model %q: unknown provider %q (known: %s)", subject, item.Value, prov,
				strings.Join(slices.Sorted(maps.Keys(c.providers)), ", "))
			continue
		}
		refs = append(refs, ModelRef{Provider: prov, Model: model})
	}
	return refs
}
