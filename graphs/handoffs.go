package graphs

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// handoff compiles one item of an agent's `handoffs:`, a target name or a
// rawHandoff mapping. It returns the handoff (nil when the item is beyond
// use) and the target's name for the caller's own problems. A handoff whose
// target is unknown comes back with a nil Target, so that its tool name can
// still be checked against its siblings.
func (c *agentCompiler) handoff(subject string, n *yaml.Node, path string) (*Handoff, string) {
	n = deref(n)
	var r rawHandoff
	switch {
	case n.Kind == yaml.ScalarNode && !isNull(n):
		r.Agent = n.Value
	case n.Kind == yaml.MappingNode:
		decodeStrict(n, &r, path, c.p)
	default:
		c.p.addf("%s: a handoff is an agent name or a mapping with `agent:`, got %s (line %d)", subject, describeNode(n), n.Line)
		return nil, ""
	}
	if r.Agent == "" {
		c.p.addf("%s: handoff at line %d: agent is required", subject, n.Line)
		return nil, ""
	}
	where := fmt.Sprintf("%s: handoff to %q", subject, r.Agent)
	h := &Handoff{Target: c.agents[r.Agent], ToolName: r.ToolName, Description: r.Description}
	if h.Target == nil {
		c.p.addf("%s: handoff to unknown agent %q", subject, r.Agent)
	}

	if h.ToolName == "" {
		h.ToolName = DeriveToolName(r.Agent)
		if !validToolName(h.ToolName) {
			c.p.addf("%s: the derived tool name %q does not match %s; give the handoff an explicit tool_name", where, h.ToolName, toolNamePattern)
		}
	} else if !validToolName(h.ToolName) {
		c.p.addf("%s: tool_name %q does not match %s", where, h.ToolName, toolNamePattern)
	}

	// A description of blanks is none: the model would be offered a tool
	// it cannot tell from the others.
	if strings.TrimSpace(h.Description) == "" && h.Target != nil {
		h.Description = h.Target.Description
		if strings.TrimSpace(h.Description) == "" {
			c.p.addf("%s: no description; give agent %q a description or the handoff its own", where, r.Agent)
		}
	}

	if sch, err := compileSchema(&r.InputSchema, defaultHandoffSchema); err != nil {
		c.p.addf("%s: invalid input_schema: %v", where, err)
	} else {
		h.Parameters, h.Schema, h.ArgOrder = sch.JSON, sch.Schema, sch.Properties
	}

	h.Filters = c.filters(&r.InputFilter, where)
	h.EnabledWhen = c.condition(r.EnabledWhen, where, "enabled_when", true)
	if r.OnHandoff != nil {
		h.OnHandoff = &Hook{URL: r.OnHandoff.URL}
		if h.OnHandoff.URL == "" {
			c.p.addf("%s: on_handoff.url is required", where)
		} else {
			checkURL(h.OnHandoff.URL, where+": on_handoff.url", c.p)
		}
		h.OnHandoff.Timeout = duration(r.OnHandoff.Timeout, DefaultHookTimeout, where+": on_handoff.timeout", c.p)
	}
	return h, r.Agent
}

// namedFilter returns the filter written as the bare name s.
func namedFilter(s string) (FilterKind, bool) {
	switch k := FilterKind(s); k {
	case FilterAll, FilterRemoveToolCalls, FilterLastUserMessage, FilterNestHistory:
		return k, true
	}
	return "", false
}

// filters parses `input_filter:`, one filter or a list applied in order.
// `all` changes nothing, so it compiles to no filter at all.
func (c *agentCompiler) filters(n *yaml.Node, where string) []Filter {
	n = deref(n)
	if n == nil || isNull(n) {
		return nil
	}
	items := []*yaml.Node{n}
	if n.Kind == yaml.SequenceNode {
		items = n.Content
	}
	var out []Filter
	for _, item := range items {
		f, ok := c.filter(deref(item), where)
		if ok && f.Kind != FilterAll {
			out = append(out, f)
		}
	}
	return out
}

// filter parses one filter: a name or {keep_last: N}.
func (c *agentCompiler) filter(n *yaml.Node, where string) (Filter, bool) {
	const want = "want all, remove_tool_calls, last_user_message, nest_history or {keep_last: N}"
	switch n.Kind {
	case yaml.ScalarNode:
		if kind, ok := namedFilter(n.Value); ok {
			return Filter{Kind: kind}, true
		}
		if n.Value == string(FilterKeepLast) {
			c.p.addf("%s: input_filter keep_last needs a count: {keep_last: N}", where)
			return Filter{}, false
		}
		c.p.addf("%s: unknown input_filter %q; %s", where, n.Value, want)
	case yaml.MappingNode:
		pairs := mappingPairs(n)
		if len(pairs) != 1 || pairs[0][0].Value != string(FilterKeepLast) {
			c.p.addf("%s: unknown input_filter mapping at line %d; %s", where, n.Line, want)
			return Filter{}, false
		}
		var count int
		v := deref(pairs[0][1])
		if v.Kind != yaml.ScalarNode || !retag(v, "!!int") || v.Decode(&count) != nil || count < 1 {
			c.p.addf("%s: input_filter keep_last must be a whole number of at least 1, got %s", where, describeNode(v))
			return Filter{}, false
		}
		return Filter{Kind: FilterKeepLast, N: count}, true
	default:
		c.p.addf("%s: input_filter list items are filters, not lists (line %d)", where, n.Line)
	}
	return Filter{}, false
}

// condition compiles a condition (CONTRACT §4.6): a handoff's
// `enabled_when:` (key "enabled_when", handoff true) or a permission rule's
// `when:` (key "when"). A handoff enabled only for a principal that no API
// key names could never be offered, which is a config error; a rule for
// such a principal is harmless (it never matches), and the contract's own
// example writes one, so it is accepted.
func (c *agentCompiler) condition(r *rawCondition, where, key string, handoff bool) *Condition {
	if r == nil {
		return nil
	}
	before := len(c.p.lines)
	cond := &Condition{Principal: r.Principal}
	if m := deref(&r.Metadata); m != nil && !isNull(m) {
		if m.Kind != yaml.MappingNode {
			c.p.addf("%s: %s.metadata must be a mapping of key: value, got %s (line %d)", where, key, describeNode(m), m.Line)
		} else {
			cond.Metadata = map[string]string{}
			for _, kv := range mappingPairs(m) {
				k, v := kv[0].Value, deref(kv[1])
				if v.Kind != yaml.ScalarNode || isNull(v) {
					// Request metadata values are strings; only a scalar
					// can equal one.
					c.p.addf("%s: %s.metadata %q must be a single value, got %s (line %d)", where, key, k, describeNode(v), v.Line)
					continue
				}
				cond.Metadata[k] = v.Value
			}
			if len(cond.Metadata) == 0 {
				cond.Metadata = nil
			}
		}
	}
	if handoff && cond.Principal != "" && !c.principals[cond.Principal] {
		c.p.addf("%s: enabled_when.principal %q is not the name of any server.api_keys entry, so the handoff could never be enabled", where, cond.Principal)
	}
	if cond.Metadata == nil && cond.Principal == "" && len(c.p.lines) == before {
		c.p.addf("%s: %s needs metadata or principal", where, key)
	}
	return cond
}

// describeFilters renders filters the way the config writes them.
func describeFilters(fs []Filter) string {
	if len(fs) == 0 {
		return string(FilterAll)
	}
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = string(f.Kind)
		if f.Kind == FilterKeepLast {
			parts[i] = fmt.Sprintf("{keep_last: %d}", f.N)
		}
	}
	return strings.Join(parts, ", ")
}
