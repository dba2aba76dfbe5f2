package graphs

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

// Sub-agents (CONTRACT §8): an agent offered to another as a tool. The
// caller stays in charge; the sub-agent runs a transcript of its own and its
// answer is the tool's result.

// SubagentPrefix starts a sub-agent tool's default name: ask_ + the name
// derived as for handoffs ("Research Desk" -> ask_research_desk).
const SubagentPrefix = "ask_"

// defaultSubagentSchema is a sub-agent tool's default input_schema.
const defaultSubagentSchema = `{"type":"object","properties":{"task":{"type":"string"}},"required":["task"]}`

// rawSubagent is the long form of an item of an agent's `subagents:`.
type rawSubagent struct {
	// Agent is the sub-agent's name; required.
	Agent string `yaml:"agent"`
	// ToolName is the function name offered to the model; default
	// ask_<agent> (see DeriveSubagentToolName).
	ToolName string `yaml:"tool_name"`
	// Description tells the model when to ask; default the sub-agent's
	// description.
	Description string `yaml:"description"`
	// InputSchema is the JSON Schema of the tool's arguments; default
	// {type: object, properties: {task: {type: string}}, required: [task]}.
	InputSchema yaml.Node `yaml:"input_schema"`
}

// AgentTool is a tool that runs Agent as a sub-agent.
type AgentTool struct {
	Agent *Agent
	// Task is set when the tool has the default input_schema: the
	// sub-agent's one user message is the call's `task`; otherwise it is
	// the call's arguments as JSON.
	Task bool
	// Schema validates the call's arguments.
	Schema *jsonschema.Schema
}

// DeriveSubagentToolName returns the default tool name of a sub-agent:
// ask_ + the name lowercased, with runs of whitespace turned into "_".
func DeriveSubagentToolName(agent string) string {
	return SubagentPrefix + strings.TrimPrefix(DeriveToolName(agent), "transfer_to_")
}

// subagents compiles an agent's `subagents:` into agent tools, appended to
// a.Tools and a.Subagents. used maps the tool names the agent already
// offers (its tools and handoffs) to what uses them, for clashes.
func (c *agentCompiler) subagents(a *Agent, items []yaml.Node, used map[string]string) {
	subject := fmt.Sprintf("agent %q", a.Name)
	for i := range items {
		n := deref(&items[i])
		var r rawSubagent
		switch {
		case n.Kind == yaml.ScalarNode && !isNull(n):
			r.Agent = n.Value
		case n.Kind == yaml.MappingNode:
			decodeStrict(n, &r, fmt.Sprintf("agents.%s.subagents[%d]", a.Name, i), c.p)
		default:
			c.p.addf("%s: a sub-agent is an agent name or a mapping with `agent:`, got %s (line %d)", subject, describeNode(n), n.Line)
			continue
		}
		if r.Agent == "" {
			c.p.addf("%s: sub-agent at line %d: agent is required", subject, n.Line)
			continue
		}
		where := fmt.Sprintf("%s: sub-agent %q", subject, r.Agent)
		target := c.agents[r.Agent]
		if target == nil {
			c.p.addf("%s: sub-agent %q is an unknown agent", subject, r.Agent)
		}
		t := &Tool{Name: r.ToolName, Description: r.Description, Kind: ToolAgent, Agent: &AgentTool{Agent: target}}
		if t.Name == "" {
			t.Name = DeriveSubagentToolName(r.Agent)
			if !validToolName(t.Name) {
				c.p.addf("%s: the derived tool name %q does not match %s; give the sub-agent an explicit tool_name", where, t.Name, toolNamePattern)
			}
		} else if !validToolName(t.Name) {
			c.p.addf("%s: tool_name %q does not match %s", where, t.Name, toolNamePattern)
		}
		if other, dup := used[t.Name]; dup {
			c.p.addf("%s: tool name %q is also used by %s; give the sub-agent another tool_name", where, t.Name, other)
		}
		used[t.Name] = fmt.Sprintf("its sub-agent %q", r.Agent)
		if strings.TrimSpace(t.Description) == "" && target != nil {
			t.Description = target.Description
			if strings.TrimSpace(t.Description) == "" {
				c.p.addf("%s: no description; give agent %q a description or the sub-agent its own", where, r.Agent)
			}
		}
		if sch, err := compileSchema(&r.InputSchema, defaultSubagentSchema); err != nil {
			c.p.addf("%s: invalid input_schema: %v", where, err)
		} else {
			t.Parameters, t.Agent.Schema = sch.JSON, sch.Schema
			t.Agent.Task = isNull(deref(&r.InputSchema))
		}
		if target != nil {
			a.Tools = append(a.Tools, t)
			a.Subagents = append(a.Subagents, t)
		}
	}
}

// checkSubagentCycles reports every agent that can reach itself through
// sub-agents (A asks B asks A): such a run could never end by design.
func checkSubagentCycles(agents map[string]*Agent, p *problems) {
	for _, name := range slices.Sorted(maps.Keys(agents)) {
		a := agents[name]
		if path := subagentPath(a, a, map[*Agent]bool{}); path != nil {
			p.addf("agent %q: sub-agent cycle %s", name, strings.Join(append([]string{name}, path...), " asks "))
		}
	}
}

// subagentPath returns the names on a sub-agent path from a to target, or
// nil when there is none.
func subagentPath(a, target *Agent, seen map[*Agent]bool) []string {
	for _, t := range a.Subagents {
		next := t.Agent.Agent
		if next == target {
			return []string{next.Name}
		}
		if seen[next] {
			continue
		}
		seen[next] = true
		if rest := subagentPath(next, target, seen); rest != nil {
			return append([]string{next.Name}, rest...)
		}
	}
	return nil
}

// RunningAgents returns every agent that can run in g, keyed by name: its
// agents and every agent they ask as a sub-agent, directly or not.
func (g *Graph) RunningAgents() map[string]*Agent { return withSubagents(g) }

// withSubagents returns the graph's agents and every agent they ask as a
// sub-agent, directly or not, keyed by name: every agent that can run in
// the graph.
func withSubagents(g *Graph) map[string]*Agent {
	all := maps.Clone(g.Agents)
	queue := slices.Collect(maps.Values(g.Agents))
	for len(queue) > 0 {
		a := queue[0]
		queue = queue[1:]
		for _, t := range a.Subagents {
			if s := t.Agent.Agent; all[s.Name] == nil {
				all[s.Name] = s
				queue = append(queue, s)
			}
		}
	}
	return all
}

// TaskMessage returns the sub-agent's one user message for a call with
// args (already validated): the task, or the arguments as JSON.
func (t *AgentTool) TaskMessage(args json.RawMessage) string {
	if t.Task {
		var v struct {
			Task string `json:"task"`
		}
		if json.Unmarshal(args, &v) == nil {
			return v.Task
		}
	}
	return string(args)
}
