package graphs

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// Describe writes the printout of `switchboard validate`: each graph, sorted
// by name, with its lead and limits, then each of its agents (the lead
// first, the others sorted) with its model(s), server tools and handoff tools
// (tool name -> target, and what restricts the handoff).
func Describe(w io.Writer, s *Set) {
	for i, name := range s.GraphNames {
		if i > 0 {
			fmt.Fprintln(w)
		}
		describeGraph(w, s.Graphs[name])
	}
}

// describeGraph writes one graph of Describe.
func describeGraph(w io.Writer, g *Graph) {
	if g.Description != "" {
		fmt.Fprintf(w, "graph %s: %s\n", g.Name, oneLine(g.Description))
	} else {
		fmt.Fprintf(w, "graph %s\n", g.Name)
	}
	fmt.Fprintf(w, "  lead: %s\n", g.Lead.Name)
	fmt.Fprintf(w, "  limits: max_handoffs %d, max_steps %d", g.MaxHandoffs, g.MaxSteps)
	if g.MaxTokensPerRun > 0 {
		fmt.Fprintf(w, ", max_tokens_per_run %d", g.MaxTokensPerRun)
	}
	fmt.Fprintln(w)
	for _, m := range g.Memory {
		fmt.Fprintf(w, "  memory %s: scope %s, max_bytes %d, ttl %s (tools %s, %s for every agent)\n",
			m.Name, strings.Join(m.Scope, ", "), m.MaxBytes, m.TTL, m.RememberTool(), m.RecallTool())
	}
	for _, a := range agentsInOrder(g) {
		if a == g.Lead {
			fmt.Fprintf(w, "  agent %s (lead)\n", a.Name)
		} else {
			fmt.Fprintf(w, "  agent %s\n", a.Name)
		}
		models := make([]string, len(a.Models))
		for i, m := range a.Models {
			models[i] = m.String()
		}
		if len(models) == 1 {
			fmt.Fprintf(w, "    model: %s\n", models[0])
		} else {
			fmt.Fprintf(w, "    models: %s (tried in order)\n", strings.Join(models, ", "))
		}
		var tools []string
		for _, t := range a.Tools {
			if t.Kind != ToolAgent {
				tools = append(tools, t.Name)
			}
		}
		if len(tools) == 0 {
			tools = []string{"none"}
		}
		fmt.Fprintf(w, "    tools: %s\n", strings.Join(tools, ", "))
		if len(a.MCP) > 0 {
			fmt.Fprintf(w, "    mcp: %s\n", describeMCP(a.MCP))
		}
		if len(a.Handoffs) == 0 {
			fmt.Fprintln(w, "    handoffs: none")
		}
		for _, h := range a.Handoffs {
			fmt.Fprintf(w, "    handoff %s -> %s%s\n", h.ToolName, h.Target.Name, handoffNotes(g, a, h))
		}
		for _, t := range a.Subagents {
			fmt.Fprintf(w, "    subagent %s -> %s\n", t.Name, t.Agent.Agent.Name)
		}
	}
}

// handoffNotes lists what sets a handoff apart from a plain one, for
// Describe.
func handoffNotes(g *Graph, a *Agent, h *Handoff) string {
	var notes []string
	if note := gateNote(g, a, h); note != "" {
		notes = append(notes, note)
	}
	if len(h.Filters) > 0 {
		notes = append(notes, "input_filter "+describeFilters(h.Filters))
	}
	if h.EnabledWhen != nil {
		notes = append(notes, "enabled_when "+describeCondition(h.EnabledWhen))
	}
	if h.OnHandoff != nil {
		notes = append(notes, "on_handoff "+h.OnHandoff.URL)
	}
	if len(notes) == 0 {
		return ""
	}
	return " (" + strings.Join(notes, "; ") + ")"
}

// describeCondition renders a condition as "plan=pro, principal=acme".
func describeCondition(c *Condition) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(c.Metadata)) {
		parts = append(parts, fmt.Sprintf("metadata.%s=%s", k, c.Metadata[k]))
	}
	if c.Principal != "" {
		parts = append(parts, "principal="+c.Principal)
	}
	return strings.Join(parts, ", ")
}

// agentsInOrder lists a graph's agents and the sub-agents they ask, the
// lead first and the others sorted by name, so that printouts are stable.
func agentsInOrder(g *Graph) []*Agent {
	all := withSubagents(g)
	out := []*Agent{g.Lead}
	for _, name := range slices.Sorted(maps.Keys(all)) {
		if a := all[name]; a != g.Lead {
			out = append(out, a)
		}
	}
	return out
}

// oneLine folds a multi-line description onto one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
