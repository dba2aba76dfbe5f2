package graphs

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"time"
)

// Permission rules gate every call the gateway itself would execute
// (docs/permissions.md): a graph's rules are read first, then the active
// agent's; the first rule that matches a call decides, and no match allows.

// Action is what a permission rule decides.
type Action string

// The actions of a rule.
const (
	ActionAllow Action = "allow"
	ActionDeny  Action = "deny"
	ActionAsk   Action = "ask"
)

// DefaultApprovalTTL is how long an approval lives when a graph sets no
// approval_ttl.
const DefaultApprovalTTL = 24 * time.Hour

// Rule is one compiled permission rule.
type Rule struct {
	// Tool is a tool or handoff tool name, or a glob where * matches any
	// run of characters.
	Tool   string
	Action Action
	When   *Condition // nil: always
}

// Matches reports whether the rule applies to a call of tool in a request
// with metadata and principal.
func (r *Rule) Matches(tool string, metadata map[string]string, principal string) bool {
	return r.When.Holds(metadata, principal) && r.matchesTool(tool)
}

// matchesTool reports whether the rule's tool name or glob matches tool.
func (r *Rule) matchesTool(tool string) bool {
	if !strings.Contains(r.Tool, "*") {
		return r.Tool == tool
	}
	ok, _ := path.Match(globPattern(r.Tool), tool)
	return ok
}

// globPattern escapes everything of a rule's glob but its stars for
// path.Match, whose other metacharacters a tool name never means.
func globPattern(g string) string {
	var b strings.Builder
	for _, r := range g {
		switch r {
		case '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// rawRule is one item of a `permissions:` list.
type rawRule struct {
	Tool   string        `yaml:"tool"`
	Action string        `yaml:"action"`
	When   *rawCondition `yaml:"when"`
}

// rules compiles a `permissions:` list.
func (c *agentCompiler) rules(raw []rawRule, where string) []Rule {
	var out []Rule
	for i, r := range raw {
		at := fmt.Sprintf("%s: permissions[%d]", where, i)
		if r.Tool == "" || hasControl(r.Tool) || strings.Contains(r.Tool, "/") {
			c.p.addf("%s: tool must be a tool name or a glob with *, got %q", at, r.Tool)
		}
		a := Action(r.Action)
		switch a {
		case ActionAllow, ActionDeny, ActionAsk:
		default:
			c.p.addf("%s: action must be allow, deny or ask, got %q", at, r.Action)
		}
		out = append(out, Rule{Tool: r.Tool, Action: a, When: c.condition(r.When, at, "when", false)})
	}
	return out
}

// compileGraphPermissions compiles each graph's rules and approval_ttl.
func compileGraphPermissions(raw map[string]rawGraph, graphs map[string]*Graph, principals map[string]bool, p *problems) {
	c := agentCompiler{principals: principals, p: p}
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		g := graphs[name]
		if g == nil {
			continue
		}
		subject := fmt.Sprintf("graph %q", name)
		g.Permissions = c.rules(raw[name].Permissions, subject)
		g.ApprovalTTL = duration(raw[name].ApprovalTTL, DefaultApprovalTTL, subject+": approval_ttl", p)
		g.PreToolCall = hook(raw[name].PreToolCall, DefaultPreToolCallTimeout, subject+": pre_tool_call", p)
		g.OnApprovalRequired = hook(raw[name].OnApprovalRequired, DefaultHookTimeout, subject+": on_approval_required", p)
	}
}

// hook compiles a graph's webhook; nil when the config has none.
func hook(r *rawHTTP, def time.Duration, where string, p *problems) *Hook {
	if r == nil {
		return nil
	}
	h := &Hook{URL: r.URL}
	if h.URL == "" {
		p.addf("%s: url is required", where)
	} else {
		checkURL(h.URL, where+".url", p)
	}
	h.Timeout = duration(r.Timeout, def, where+".timeout", p)
	return h
}

// Strictness orders actions: deny > ask > allow.
func (a Action) Strictness() int {
	switch a {
	case ActionDeny:
		return 2
	case ActionAsk:
		return 1
	}
	return 0
}

// Gate returns the rule with the strictest action the rules could take on
// a call of tool by agent a in g, whatever the request: the rules that
// match tool are read in order, graph's first, up to the first without a
// condition, which decides every call that gets to it; of those, the
// first with the strictest action. nil when none matches (the call is
// allowed). Diagrams and `validate` use it to mark what a rule gates: a
// conditional allow before a deny still leaves the deny for every request
// the condition misses.
func (g *Graph) Gate(a *Agent, tool string) *Rule {
	var worst *Rule
	for _, rules := range [][]Rule{g.Permissions, a.Permissions} {
		for i := range rules {
			r := &rules[i]
			if !r.matchesTool(tool) {
				continue
			}
			if worst == nil || r.Action.Strictness() > worst.Action.Strictness() {
				worst = r
			}
			if r.When == nil {
				return worst
			}
		}
	}
	return worst
}

// gateNote is how a diagram or `validate` marks a handoff a rule gates:
// "ask" or "deny", with the rule's condition when it has one ("ask when
// metadata.plan=pro"); empty when the first matching rule allows or none
// matches.
func gateNote(g *Graph, a *Agent, h *Handoff) string {
	r := g.Gate(a, h.ToolName)
	if r == nil || r.Action == ActionAllow {
		return ""
	}
	if r.When != nil {
		return string(r.Action) + " when " + describeCondition(r.When)
	}
	return string(r.Action)
}
