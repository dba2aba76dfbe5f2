package mcptools

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-ai/switchboard/graphs"
)

// httpYAML is a config whose agent billing uses the HTTP server at url.
func httpYAML(url, headers string) string {
	return fmt.Sprintf(`
mcp_servers:
  remote:
    url: %q
    headers: %s
    tools: [echo, pid, fail]
agents:
  billing: {model: demo/echo, mcp: [remote]}
graphs: {support: {lead: billing}}
`, url, headers)
}

func TestHTTPToolsWithHeadersAndAllowList(t *testing.T) {
	srv := startHTTPServer(t, "Bearer t1")
	m, _ := startManager(t, httpYAML(srv.URL(), `{Authorization: "Bearer ${TOKEN}"}`), map[string]string{"TOKEN": "t1"})
	if got, want := toolNames(m.offeredTo("billing")), []string{"echo", "fail", "pid"}; !slices.Equal(got, want) {
		t.Fatalf("billing's tools = %v, want the allow-list %v", got, want)
	}
	got, err := m.Call(context.Background(), "remote", "echo", `{"message":"over http"}`)
	if err != nil || got != "Echo: over http\nsecond part" {
		t.Errorf("echo = %q, %v", got, err)
	}
	_, err = m.Call(context.Background(), "remote", "fail", `{}`)
	if err == nil || err.Error() != "the customer does not exist" {
		t.Errorf("fail = %v, want the server's text", err)
	}
}

func TestHTTPWrongHeaderIsUnreachable(t *testing.T) {
	srv := startHTTPServer(t, "Bearer t1")
	m, rec := startManager(t, httpYAML(srv.URL(), `{Authorization: "Bearer wrong"}`), nil)
	if got := m.offeredTo("billing"); len(got) != 0 {
		t.Errorf("billing's tools = %v, want none from a server that refused us", toolNames(got))
	}
	if rec.count("mcp server unreachable") != 1 {
		t.Errorf("log = %q, want one warning that the server is unreachable", rec.msgs)
	}
}

// Start returns once each server's first attempt is over and told: its
// warning is logged by then, however slow the logger (CI found the test
// above reading the log before the warning was written).
func TestStartReturnsOnceTheFirstAttemptIsLogged(t *testing.T) {
	rec := &logRecorder{slow: 200 * time.Millisecond}
	startManagerLogging(t, httpYAML("http://"+reserveAddr(t)+"/mcp", "{}"), nil, rec)
	if rec.count("mcp server unreachable") != 1 {
		t.Errorf("log = %q when Start returned, want the warning that the server is unreachable", rec.msgs)
	}
}

func TestHTTPServerUpLater(t *testing.T) {
	addr := reserveAddr(t)
	m, rec := startManager(t, httpYAML("http://"+addr+"/mcp", "{}"), nil)
	if got := m.offeredTo("billing"); len(got) != 0 {
		t.Fatalf("billing's tools = %v before the server is up", toolNames(got))
	}
	if rec.count("mcp server unreachable") != 1 {
		t.Errorf("log = %q, want one warning that the server is unreachable", rec.msgs)
	}
	srv := &httpServer{t: t, addr: addr}
	srv.start()
	t.Cleanup(srv.stop)
	eventually(t, "the tools of a server that came up", func() error {
		if len(m.offeredTo("billing")) != 3 {
			return fmt.Errorf("tools %v", toolNames(m.offeredTo("billing")))
		}
		return nil
	})
	if got, err := m.Call(context.Background(), "remote", "echo", `{"message":"late"}`); err != nil || !strings.HasPrefix(got, "Echo: late") {
		t.Errorf("echo = %q, %v", got, err)
	}
}

func TestHTTPServerKilledAndBack(t *testing.T) {
	srv := startHTTPServer(t, "")
	m, _ := startManager(t, httpYAML(srv.URL(), "{}"), nil)
	ctx := context.Background()
	if _, err := m.Call(ctx, "remote", "echo", `{"message":"one"}`); err != nil {
		t.Fatal(err)
	}
	srv.stop()
	if _, err := m.Call(ctx, "remote", "echo", `{"message":"two"}`); err == nil {
		t.Fatal("a call to a killed server succeeded")
	} else if strings.Contains(err.Error(), "127.0.0.1") {
		t.Errorf("the error tells the model an address: %v", err)
	}
	if len(m.offeredTo("billing")) != 3 {
		t.Error("the tools of a server that went down are no longer offered")
	}
	if _, err := m.Call(ctx, "remote", "echo", `{"message":"three"}`); err == nil {
		t.Fatal("a call to a server that is down succeeded")
	}
	srv.start()
	eventually(t, "a call after the server came back", func() error {
		_, err := m.Call(ctx, "remote", "echo", `{"message":"four"}`)
		return err
	})
}

func TestNameClashesAreNotOffered(t *testing.T) {
	srv := startHTTPServer(t, "")
	yml := fmt.Sprintf(`
tools:
  echo: {http: {url: "http://127.0.0.1:1/echo"}}
mcp_servers:
  first: {url: %[1]q, tools: [pid, fail]}
  second: {url: %[1]q}
agents:
  billing:
    model: demo/echo
    tools: [echo]
    handoffs: [{agent: refunds, tool_name: slow}]
    mcp: [first, second]
  refunds: {model: demo/echo, description: Refunds}
graphs: {support: {lead: billing}}
`, srv.URL())
	m, rec := startManager(t, yml, nil)
	got := m.offeredTo("billing")
	want := []string{"big", "die", "fail", "getenv", "pid", "spawn", "weather"}
	if !slices.Equal(toolNames(got), want) {
		t.Errorf("billing's tools = %v, want %v", toolNames(got), want)
	}
	for _, tool := range got {
		if (tool.Name == "pid" || tool.Name == "fail") && tool.MCP.Server.Name != "first" {
			t.Errorf("%s comes from %s, want first: the server listed first wins", tool.Name, tool.MCP.Server.Name)
		}
	}
	for _, p := range []string{
		`config invalid: agent "billing": mcp server "second": tool "echo" clashes with a tool or handoff of the agent`,
		`config invalid: agent "billing": mcp server "second": tool "slow" clashes with a tool or handoff of the agent`,
		`config invalid: agent "billing": mcp server "second": tool "pid" is also offered by mcp server "first"`,
	} {
		if n := rec.count(p); n != 1 {
			t.Errorf("%q logged %d times, want once; log: %q", p, n, rec.msgs)
		}
	}
	if got := m.offeredTo("refunds"); len(got) != 0 {
		t.Errorf("refunds, without mcp, is offered %v", toolNames(got))
	}
}

// A server tool named as a memory tool of a graph the agent runs in (as
// lead, or as a sub-agent) is a clash logged once per graph as a config
// error, as one with a tool or handoff is; the manager still lists it,
// since the run offers the memory tool in its place only where it applies
// (a graph without the slot, a run without its scope).
func TestMemoryToolClashesAreLogged(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "1"}, nil)
	for _, name := range []string{"recall_notes", "remember_other", "lookup"} {
		mcp.AddTool(s, &mcp.Tool{Name: name},
			func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{}, nil, nil
			})
	}
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(srv.Close)
	yml := fmt.Sprintf(`
mcp_servers:
  crm: {url: %q}
memory:
  notes: {}
agents:
  billing: {model: demo/echo, description: Billing, mcp: [crm]}
  desk: {model: demo/echo, subagents: [billing]}
graphs:
  support: {lead: billing, memory: [notes]}
  help: {lead: desk, memory: [notes]}
  plain: {lead: billing}
`, srv.URL)
	m, rec := startManager(t, yml, nil)
	if got, want := toolNames(m.offeredTo("billing")), []string{"lookup", "recall_notes", "remember_other"}; !slices.Equal(got, want) {
		t.Errorf("billing's tools = %v, want %v", got, want)
	}
	for _, g := range []string{"help", "support"} {
		p := fmt.Sprintf(`config invalid: agent "billing": mcp server "crm": tool "recall_notes" clashes with a memory tool of graph %q`, g)
		if n := rec.count(p); n != 1 {
			t.Errorf("%q logged %d times, want once; log: %q", p, n, rec.msgs)
		}
	}
	if n := rec.count("config invalid"); n != 2 {
		t.Errorf("%d config errors logged, want the 2 clashes; log: %q", n, rec.msgs)
	}
}

// A manager built for a reloaded config inherits the tools its predecessor
// last listed from a server configured the same, though that server is
// down: they stay offered and their calls fail until it is back. A server
// whose config changed inherits nothing.
func TestReloadKeepsToolsOfADownServer(t *testing.T) {
	srv := startHTTPServer(t, "")
	yml := httpYAML(srv.URL(), "{}")
	old, _ := startManager(t, yml, nil)
	if len(old.offeredTo("billing")) != 3 {
		t.Fatalf("billing's tools = %v", toolNames(old.offeredTo("billing")))
	}
	srv.stop()
	parse := func(yml string) *graphs.Set {
		cfg, err := graphs.Parse([]byte(yml), map[string]graphs.Provider{"demo": {Kind: "demo"}}, func(string) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	for _, tc := range []struct {
		name string
		yml  string
		want int
	}{
		{"same config", yml, 3},
		{"changed config", httpYAML(srv.URL(), `{X-Other: "1"}`), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := New(parse(tc.yml), Options{Logger: slog.New(&logRecorder{})})
			m.Inherit(old)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			m.Start(ctx)
			defer m.Close()
			if got := m.offeredTo("billing"); len(got) != tc.want {
				t.Fatalf("billing's tools after the reload = %v, want %d", toolNames(got), tc.want)
			}
			if tc.want > 0 {
				if _, err := m.Call(context.Background(), "remote", "echo", `{"message":"x"}`); err == nil {
					t.Error("a call to the down server did not fail")
				}
			}
		})
	}
}

// A server URL that answers 307 is not followed: the server's headers
// would go with every request to the address it names, which is not in
// the config (here a server that takes them, so following it would offer
// its tools). The server is unreachable instead.
func TestHTTPRedirectIsNotFollowed(t *testing.T) {
	target := startHTTPServer(t, "Bearer t1")
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL(), http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirect.Close)
	m, rec := startManager(t, httpYAML(redirect.URL+"/mcp", `{Authorization: "Bearer t1"}`), nil)
	if got := m.offeredTo("billing"); len(got) != 0 {
		t.Errorf("billing's tools = %v, from the redirect's target", toolNames(got))
	}
	if rec.count("mcp server unreachable") != 1 {
		t.Errorf("log = %q, want one warning that the server is unreachable", rec.msgs)
	}
}

// An agent that runs only as another's sub-agent is offered its servers'
// tools too.
func TestSubagentIsOfferedItsServersTools(t *testing.T) {
	srv := startHTTPServer(t, "")
	m, _ := startManager(t, fmt.Sprintf(`
mcp_servers:
  remote: {url: %q, tools: [echo]}
agents:
  desk: {model: demo/echo, subagents: [billing]}
  billing: {model: demo/echo, description: Billing, mcp: [remote]}
graphs: {support: {lead: desk}}
`, srv.URL()), nil)
	if got, want := toolNames(m.offeredTo("billing")), []string{"echo"}; !slices.Equal(got, want) {
		t.Errorf("the sub-agent's tools = %v, want %v", got, want)
	}
}
