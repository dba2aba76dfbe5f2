// Package mcp_test runs Switchboard's MCP support against the reference
// third-party server, @modelcontextprotocol/server-everything from npm
// (pinned in package.json), over stdio and over streamable HTTP.
// scripts/mcp-deps.sh installs it (make test does); without it the tests
// skip, except with CI=true, where they fail.
package mcp_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/internal/testenv"
	"github.com/switchboard-ai/switchboard/mcptools"
)

func TestMain(m *testing.M) { testenv.VerifyNoLeaks(m) }

// startManager compiles yml and starts an MCP manager for it; billing is
// the config's agent billing.
func startManager(t *testing.T, yml string, env map[string]string) (m *mcptools.Manager, billing *graphs.Agent) {
	t.Helper()
	cfg, err := graphs.Parse([]byte(yml), map[string]graphs.Provider{"demo": {Kind: "demo"}}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	m = mcptools.New(cfg, mcptools.Options{Logger: log})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m.Start(ctx)
	t.Cleanup(m.Close)
	return m, cfg.Graphs["support"].Agents["billing"]
}

// managerYAML is a config whose agent billing uses server, a YAML mapping.
func managerYAML(server string) string {
	return `
mcp_servers:
  everything: ` + server + `
agents:
  billing: {model: demo/echo, mcp: [everything]}
graphs: {support: {lead: billing}}
`
}

func TestEverythingOverStdio(t *testing.T) {
	e := needEverything(t)
	m, billing := startManager(t, managerYAML(e.stdioServer()), nil)
	checkEverythingTools(t, m, billing)
}

func TestEverythingOverHTTP(t *testing.T) {
	e := needEverything(t)
	srv := e.startHTTP(t, 0)
	m, billing := startManager(t, managerYAML(`{url: "`+srv.url()+`"}`), nil)
	checkEverythingTools(t, m, billing)
}

// checkEverythingTools checks what billing is offered and a few calls.
func checkEverythingTools(t *testing.T, m *mcptools.Manager, billing *graphs.Agent) {
	t.Helper()
	var names []string
	for _, tool := range m.Tools(billing) {
		names = append(names, tool.Name)
	}
	for _, want := range []string{"echo", "get-sum", "get-structured-content"} {
		if !slices.Contains(names, want) {
			t.Errorf("billing is offered %v, without %s", names, want)
		}
	}
	ctx := context.Background()
	calls := []struct{ tool, args, want string }{
		{"echo", `{"message":"hello from switchboard"}`, "Echo: hello from switchboard"},
		{"get-sum", `{"a":2,"b":40}`, "The sum of 2 and 40 is 42."},
	}
	for _, c := range calls {
		got, err := m.Call(ctx, "everything", c.tool, c.args)
		if err != nil || got != c.want {
			t.Errorf("%s(%s) = %q, %v; want %q", c.tool, c.args, got, err, c.want)
		}
	}
	// Its text part and its structured content are the same JSON: the
	// result holds it once.
	got, err := m.Call(ctx, "everything", "get-structured-content", `{"location":"Chicago"}`)
	var v any
	if err != nil || json.Unmarshal([]byte(got), &v) != nil {
		t.Fatalf("get-structured-content = %q, %v; want one JSON value", got, err)
	}
	want := map[string]any{"temperature": 36.0, "conditions": "Light rain / drizzle", "humidity": 82.0}
	if !reflect.DeepEqual(v, want) {
		t.Errorf("get-structured-content = %v, want %v", v, want)
	}
	// Invalid arguments: the server says why, and the call fails.
	if _, err := m.Call(ctx, "everything", "get-sum", `{"a":"two"}`); err == nil {
		t.Error("get-sum with a string succeeded")
	}
}

func TestEverythingKilledOverHTTPAndBack(t *testing.T) {
	e := needEverything(t)
	srv := e.startHTTP(t, 0)
	m, billing := startManager(t, managerYAML(`{url: "`+srv.url()+`", timeout: 10s}`), nil)
	ctx := context.Background()
	if _, err := m.Call(ctx, "everything", "echo", `{"message":"one"}`); err != nil {
		t.Fatal(err)
	}
	srv.kill(t)
	if got, err := m.Call(ctx, "everything", "echo", `{"message":"two"}`); err == nil {
		t.Fatalf("echo on a killed server = %q", got)
	}
	if len(m.Tools(billing)) == 0 {
		t.Error("the tools of a server that went down are no longer offered")
	}
	e.startHTTP(t, srv.port)
	eventually(t, "echo once the server is back", func() error {
		_, err := m.Call(ctx, "everything", "echo", `{"message":"three"}`)
		return err
	})
}

// eventually polls f until it succeeds: reconnection is in the background.
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after 60s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// dir is this package's folder, where package.json is.
func dir(t *testing.T) string {
	t.Helper()
	d, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// yamlString quotes s for YAML.
func yamlString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// stdioCommand is the YAML command list that runs server-everything.
func stdioCommand(e *everything) string {
	return "[node, " + yamlString(e.entry) + ", stdio]"
}

func (e *everything) stdioServer() string {
	return "{command: " + stdioCommand(e) + "}"
}
