package graphs

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// This file holds `mcp_servers:` and `agents.<a>.mcp`: tool servers spoken
// to over the Model Context Protocol. Only what the file says is checked
// here; which tools a server has is known only once the gateway has
// connected to it, so the clashes of those names are found then (package
// mcptools), and only the allow-lists can be checked against an agent's
// other tools now.

// rawMCPServer is one entry of `mcp_servers:`: exactly one of Command and URL.
type rawMCPServer struct {
	// Command starts a server that speaks MCP on its stdin and stdout: the
	// program, then its arguments. The gateway starts it and stops it.
	Command []string `yaml:"command"`
	// Env is added to the environment of Command; default none.
	Env map[string]string `yaml:"env"`
	// URL is the endpoint of a streamable HTTP server.
	URL string `yaml:"url"`
	// Headers are sent with every request to URL; default none.
	Headers map[string]string `yaml:"headers"`
	// Tools is the allow-list of tool names offered; default every tool.
	Tools []string `yaml:"tools"`
	// Timeout bounds one tool call, a Go duration; default 30s.
	Timeout string `yaml:"timeout"`
}

// MCPServer is one compiled entry of `mcp_servers:`.
type MCPServer struct {
	Name string
	// Command is the program and its arguments of a stdio server; empty
	// for a streamable HTTP server.
	Command []string
	// Env is added to a stdio server's environment.
	Env map[string]string
	// URL is a streamable HTTP server's endpoint; empty for stdio.
	URL string
	// Headers are sent with every HTTP request to URL.
	Headers map[string]string
	// Tools is the allow-list; nil offers every tool of the server.
	Tools []string
	// Timeout bounds one tool call; default 30s.
	Timeout time.Duration
}

// MCPTool is where a tool of kind ToolMCP runs.
type MCPTool struct {
	Server *MCPServer
	// Tool is the tool's name on the server, which is also Tool.Name.
	Tool string
}

// Transport names how the gateway speaks to the server: "stdio" or "http".
func (s *MCPServer) Transport() string {
	if s.URL != "" {
		return "http"
	}
	return "stdio"
}

// Allows reports whether the allow-list lets the server's tool name through.
func (s *MCPServer) Allows(name string) bool {
	return s.Tools == nil || slices.Contains(s.Tools, name)
}

// ValidToolName reports whether name can be offered to a model as a tool:
// docs/config.md's ^[a-zA-Z0-9_-]{1,64}$.
func ValidToolName(name string) bool { return validToolName(name) }

// OwnToolNames returns the names the agent offers besides its MCP tools:
// its server tools and its handoff tools. An MCP tool may take none of them.
func (a *Agent) OwnToolNames() []string {
	names := make([]string, 0, len(a.Tools)+len(a.Handoffs))
	for _, t := range a.Tools {
		names = append(names, t.Name)
	}
	for _, h := range a.Handoffs {
		names = append(names, h.ToolName)
	}
	return names
}

// compileMCPServers builds every entry of `mcp_servers:`, used or not.
func compileMCPServers(raw map[string]rawMCPServer, p *problems) map[string]*MCPServer {
	if len(raw) == 0 {
		return nil
	}
	out := make(map[string]*MCPServer, len(raw))
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		r := raw[name]
		subject := fmt.Sprintf("mcp server %q", name)
		if name == "" || hasControl(name) {
			p.addf("%s: a server name must be non-empty and printable", subject)
		}
		s := &MCPServer{
			Name:    name,
			Command: r.Command,
			Env:     r.Env,
			URL:     r.URL,
			Headers: r.Headers,
			Timeout: duration(r.Timeout, DefaultMCPTimeout, subject+": timeout", p),
		}
		switch {
		case len(r.Command) > 0 && r.URL != "":
			p.addf("%s: give either command (stdio) or url (streamable HTTP), not both", subject)
		case len(r.Command) == 0 && r.URL == "":
			p.addf("%s: command (stdio) or url (streamable HTTP) is required", subject)
		case len(r.Command) > 0:
			if r.Command[0] == "" {
				p.addf("%s: command: the program (its first item) is empty", subject)
			}
			if len(r.Headers) > 0 {
				p.addf("%s: headers apply to a url server, not a command", subject)
			}
		default:
			checkURL(r.URL, subject+": url", p)
			if len(r.Env) > 0 {
				p.addf("%s: env applies to a command server, not a url", subject)
			}
		}
		for _, k := range slices.Sorted(maps.Keys(r.Headers)) {
			if !headerNamePattern.MatchString(k) {
				p.addf("%s: headers: %q is not a valid header name", subject, k)
			}
		}
		for _, k := range slices.Sorted(maps.Keys(r.Env)) {
			if k == "" || hasControl(k) || strings.Contains(k, "=") {
				p.addf("%s: env: %q is not a valid variable name", subject, k)
			}
		}
		if r.Tools != nil {
			s.Tools = []string{}
			for _, t := range r.Tools {
				switch {
				case !validToolName(t):
					p.addf("%s: tools: %q can never be offered: a tool name must match %s", subject, t, toolNamePattern)
				case slices.Contains(s.Tools, t):
					p.addf("%s: tools: %q is listed twice", subject, t)
				default:
					s.Tools = append(s.Tools, t)
				}
			}
		}
		out[name] = s
	}
	return out
}

// compileAgentMCP resolves an agent's `mcp:` list, and checks the names an
// allow-list already fixes against the agent's other tools and handoffs
// (a server without an allow-list is checked once the gateway knows its
// tools).
func compileAgentMCP(a *Agent, names []string, servers map[string]*MCPServer, p *problems) {
	subject := fmt.Sprintf("agent %q", a.Name)
	own := map[string]bool{}
	for _, n := range a.OwnToolNames() {
		own[n] = true
	}
	byTool := map[string]string{} // allow-listed tool -> its server
	for _, name := range names {
		s, ok := servers[name]
		switch {
		case !ok:
			p.addf("%s: unknown mcp server %q (known: %s)", subject, name, knownNames(servers))
			continue
		case slices.Contains(a.MCP, s):
			p.addf("%s: mcp server %q is listed twice", subject, name)
			continue
		}
		a.MCP = append(a.MCP, s)
		for _, t := range s.Tools {
			if own[t] {
				p.addf("%s: mcp server %q: tool %q clashes with a tool or handoff of the agent", subject, name, t)
			}
			if other, dup := byTool[t]; dup {
				p.addf("%s: mcp server %q: tool %q is also offered by mcp server %q", subject, name, t, other)
			}
			byTool[t] = name
		}
	}
}

// knownNames lists a map's keys for a problem, or "none".
func knownNames[V any](m map[string]V) string {
	if len(m) == 0 {
		return "none"
	}
	return strings.Join(slices.Sorted(maps.Keys(m)), ", ")
}

// describeMCP lists an agent's MCP servers for Describe: each with its
// transport and, when it has one, its allow-list.
func describeMCP(servers []*MCPServer) string {
	parts := make([]string, len(servers))
	for i, s := range servers {
		parts[i] = fmt.Sprintf("%s (%s", s.Name, s.Transport())
		if s.Tools != nil {
			parts[i] += ": " + strings.Join(s.Tools, ", ")
		}
		parts[i] += ")"
	}
	return strings.Join(parts, ", ")
}
