package graphs

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestMCPServers(t *testing.T) {
	s := mustParse(t, `
mcp_servers:
  everything:
    command: [npx, -y, "@modelcontextprotocol/server-everything"]
    env: {KEY: "${KEY}"}
  crm:
    url: http://127.0.0.1:9000/mcp
    headers: {Authorization: "Bearer ${CRM_TOKEN}"}
    tools: [lookup_customer]
    timeout: 5s
agents:
  billing: {model: openai/m, mcp: [crm, everything]}
graphs: {support: {lead: billing}}`, map[string]string{"KEY": "k1", "CRM_TOKEN": "t1"})

	want := map[string]*MCPServer{
		"everything": {
			Name:    "everything",
			Command: []string{"npx", "-y", "@modelcontextprotocol/server-everything"},
			Env:     map[string]string{"KEY": "k1"},
			Timeout: 30 * time.Second,
		},
		"crm": {
			Name:    "crm",
			URL:     "http://127.0.0.1:9000/mcp",
			Headers: map[string]string{"Authorization": "Bearer t1"},
			Tools:   []string{"lookup_customer"},
			Timeout: 5 * time.Second,
		},
	}
	if diff := cmp.Diff(want, s.MCPServers); diff != "" {
		t.Errorf("MCPServers (-want +got):\n%s", diff)
	}
	billing := s.Graphs["support"].Lead
	if got := []*MCPServer{s.MCPServers["crm"], s.MCPServers["everything"]}; !cmp.Equal(got, billing.MCP) {
		t.Errorf("billing.MCP = %v, want crm then everything", billing.MCP)
	}
	if got := s.MCPServers["crm"].Transport(); got != "http" {
		t.Errorf("crm transport = %q, want http", got)
	}
	if got := s.MCPServers["everything"].Transport(); got != "stdio" {
		t.Errorf("everything transport = %q, want stdio", got)
	}
	var b strings.Builder
	Describe(&b, s)
	if want := "    mcp: crm (http: lookup_customer), everything (stdio)\n"; !strings.Contains(b.String(), want) {
		t.Errorf("Describe = %q, want it to hold %q", b.String(), want)
	}
	if !s.MCPServers["everything"].Allows("anything") || s.MCPServers["crm"].Allows("echo") || !s.MCPServers["crm"].Allows("lookup_customer") {
		t.Error("Allows does not follow the allow-lists")
	}
}

func TestMCPProblems(t *testing.T) {
	tests := []struct {
		name string
		yml  string
		want []string
	}{
		{
			name: "unknown server",
			yml: `
mcp_servers: {crm: {url: "http://127.0.0.1:9000/mcp"}}
agents: {billing: {model: openai/m, mcp: [crn]}}
graphs: {support: {lead: billing}}`,
			want: []string{`config invalid: agent "billing": unknown mcp server "crn" (known: crm)`},
		},
		{
			name: "no servers at all",
			yml: `
agents: {billing: {model: openai/m, mcp: [crm]}}
graphs: {support: {lead: billing}}`,
			want: []string{`config invalid: agent "billing": unknown mcp server "crm" (known: none)`},
		},
		{
			name: "neither command nor url, both, bad url",
			yml: `
mcp_servers:
  none: {timeout: 5s}
  both: {command: [node, s.js], url: "http://127.0.0.1:1/mcp"}
  badurl: {url: "127.0.0.1:9000/mcp"}
  emptyprog: {command: [""]}
agents: {billing: {model: openai/m}}
graphs: {support: {lead: billing}}`,
			want: []string{
				`config invalid: mcp server "badurl": url: "127.0.0.1:9000/mcp" is not an absolute http(s) URL`,
				`config invalid: mcp server "both": give either command (stdio) or url (streamable HTTP), not both`,
				`config invalid: mcp server "emptyprog": command: the program (its first item) is empty`,
				`config invalid: mcp server "none": command (stdio) or url (streamable HTTP) is required`,
			},
		},
		{
			name: "settings of the other transport, bad names, bad timeout",
			yml: `
mcp_servers:
  s: {command: [node], headers: {X-A: b}, timeout: soon}
  h: {url: "http://127.0.0.1:1/mcp", env: {A: b}, headers: {"bad header": x}, tools: [ok, "not.ok", ok]}
agents: {billing: {model: openai/m}}
graphs: {support: {lead: billing}}`,
			want: []string{
				`config invalid: mcp server "h": env applies to a command server, not a url`,
				`config invalid: mcp server "h": headers: "bad header" is not a valid header name`,
				`config invalid: mcp server "h": tools: "not.ok" can never be offered: a tool name must match ^[a-zA-Z0-9_-]{1,64}$`,
				`config invalid: mcp server "h": tools: "ok" is listed twice`,
				`config invalid: mcp server "s": timeout: "soon" is not a duration (write e.g. "500ms", "30s", "24h")`,
				`config invalid: mcp server "s": headers apply to a url server, not a command`,
			},
		},
		{
			name: "allow-listed names that clash",
			yml: `
tools:
  lookup: {http: {url: "http://127.0.0.1:7000/t"}}
mcp_servers:
  a: {url: "http://127.0.0.1:1/mcp", tools: [lookup, transfer_to_refunds, echo]}
  b: {command: [node], tools: [echo]}
agents:
  billing: {model: openai/m, tools: [lookup], handoffs: [refunds], mcp: [a, b, a]}
  refunds: {model: openai/m, description: Refunds}
graphs: {support: {lead: billing}}`,
			want: []string{
				`config invalid: agent "billing": mcp server "a": tool "lookup" clashes with a tool or handoff of the agent`,
				`config invalid: agent "billing": mcp server "a": tool "transfer_to_refunds" clashes with a tool or handoff of the agent`,
				`config invalid: agent "billing": mcp server "b": tool "echo" is also offered by mcp server "a"`,
				`config invalid: agent "billing": mcp server "a" is listed twice`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := problemsOf(t, tt.yml, nil)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}
