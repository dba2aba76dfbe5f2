package graphs

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Permission rules need a tool and one of the three actions.
func TestPermissionRules(t *testing.T) {
	yaml := `
providers: {p: {base_url: "http://127.0.0.1:1/v1"}}
agents:
  a:
    model: p/m
    permissions:
      - {tool: "x_*", action: ask, when: {metadata: {plan: pro}}}
      - {tool: "", action: allow}
      - {tool: y, action: maybe}
graphs:
  g: {lead: a, approval_ttl: 1h, permissions: [{tool: z, action: deny}]}
`
	_, err := Parse([]byte(yaml), nil, func(string) string { return "" })
	if err == nil || !strings.Contains(err.Error(), `agent "a": permissions[1]: tool must be`) || !strings.Contains(err.Error(), `permissions[2]: action must be allow, deny or ask, got "maybe"`) {
		t.Fatalf("err %v", err)
	}
	set, err := Parse([]byte(strings.Replace(strings.Replace(yaml, "      - {tool: \"\", action: allow}\n", "", 1), "maybe", "allow", 1)), nil, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	g := set.Graphs["g"]
	if g.ApprovalTTL != time.Hour || len(g.Permissions) != 1 || g.Permissions[0].Action != ActionDeny {
		t.Errorf("graph rules %+v ttl %v", g.Permissions, g.ApprovalTTL)
	}
	r := g.Lead.Permissions[0]
	if !r.Matches("x_refund", map[string]string{"plan": "pro"}, "") || r.Matches("x_refund", nil, "") || r.Matches("y_x_refund", map[string]string{"plan": "pro"}, "") {
		t.Errorf("rule %+v matches wrongly", r)
	}
}

// A graph's pre_tool_call and on_approval_required hooks need an absolute
// http(s) url and a positive timeout; their timeouts default to 2s and 5s.
func TestPermissionHooks(t *testing.T) {
	base := `
providers: {p: {base_url: "http://127.0.0.1:1/v1"}}
agents: {a: {model: p/m}}
graphs:
  g:
    lead: a
`
	set, err := Parse([]byte(base+"    pre_tool_call: {url: \"http://127.0.0.1:7000/gate\"}\n    on_approval_required: {url: \"https://hooks.example/notify\", timeout: 1s}\n"), nil, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	g := set.Graphs["g"]
	if g.PreToolCall == nil || g.PreToolCall.URL != "http://127.0.0.1:7000/gate" || g.PreToolCall.Timeout != 2*time.Second {
		t.Errorf("pre_tool_call %+v", g.PreToolCall)
	}
	if g.OnApprovalRequired == nil || g.OnApprovalRequired.Timeout != time.Second {
		t.Errorf("on_approval_required %+v", g.OnApprovalRequired)
	}
	if set, err := Parse([]byte(base), nil, func(string) string { return "" }); err != nil || set.Graphs["g"].PreToolCall != nil || set.Graphs["g"].OnApprovalRequired != nil {
		t.Errorf("no hooks: %v", err)
	}
	bad := base + "    pre_tool_call: {url: \"/gate\", timeout: soon}\n    on_approval_required: {timeout: -1s}\n"
	got := problemsOf(t, bad, nil)
	want := []string{
		`config invalid: graph "g": on_approval_required: url is required`,
		`config invalid: graph "g": on_approval_required.timeout: must be positive, got "-1s"`,
		`config invalid: graph "g": pre_tool_call.url: "/gate" is not an absolute http(s) URL`,
		`config invalid: graph "g": pre_tool_call.timeout: "soon" is not a duration (write e.g. "500ms", "30s", "24h")`,
	}
	slices.Sort(got)
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

// Gate, which diagrams and `validate` mark handoffs with, reads past a
// conditional rule: a conditional allow before a deny leaves the deny for
// every request the condition misses; an unconditional rule ends the
// search.
func TestGateReadsPastConditions(t *testing.T) {
	yaml := `
providers: {p: {base_url: "http://127.0.0.1:1/v1"}}
agents:
  a: {model: p/m, handoffs: [b]}
  b: {model: p/m, description: billing}
graphs:
  g:
    lead: a
    permissions:
      - {tool: "transfer_*", action: allow, when: {metadata: {plan: pro}}}
      - {tool: transfer_to_b, action: deny}
      - {tool: lookup, action: allow}
      - {tool: lookup, action: deny}
      - {tool: "ask_*", action: ask, when: {metadata: {plan: free}}}
`
	set, err := Parse([]byte(yaml), nil, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	g := set.Graphs["g"]
	for tool, want := range map[string]Action{"transfer_to_b": ActionDeny, "lookup": ActionAllow, "ask_x": ActionAsk, "other": ""} {
		var got Action
		if r := g.Gate(g.Lead, tool); r != nil {
			got = r.Action
		}
		if got != want {
			t.Errorf("Gate(%s) = %q, want %q", tool, got, want)
		}
	}
	if note := gateNote(g, g.Lead, g.Lead.Handoffs[0]); note != "deny" {
		t.Errorf("gateNote = %q, want deny", note)
	}
}

// CONTRACT §6's own example: a rule's `when: {principal: acme}` is valid
// though no API key is named acme (it never matches then; a handoff's
// enabled_when for such a principal is an error, since the handoff could
// never be offered). A rule's `when` errors say `when`, not enabled_when.
func TestPermissionRuleForAnyPrincipal(t *testing.T) {
	yaml := `
providers: {p: {base_url: "http://127.0.0.1:1/v1"}}
tools:
  issue_refund: {http: {url: "http://127.0.0.1:1/refund"}}
  delete_order: {http: {url: "http://127.0.0.1:1/delete"}}
agents:
  refunds:
    model: p/m
    tools: [issue_refund, delete_order]
    permissions:
      - {tool: issue_refund, action: ask}
      - {tool: "delete_*", action: deny, when: {principal: acme}}
graphs:
  support:
    lead: refunds
    permissions:
      - {tool: escalate_refund, action: ask}
`
	set, err := Parse([]byte(yaml), nil, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	r := set.Graphs["support"].Lead.Permissions[1]
	if !r.Matches("delete_order", nil, "acme") || r.Matches("delete_order", nil, "globex") {
		t.Errorf("rule %+v matches wrongly", r)
	}
	_, err = Parse([]byte(strings.Replace(yaml, "when: {principal: acme}", "when: {}", 1)), nil, func(string) string { return "" })
	if err == nil || !strings.Contains(err.Error(), `agent "refunds": permissions[1]: when needs metadata or principal`) {
		t.Errorf("an empty when: %v", err)
	}
}
