package mcp_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
	"github.com/switchboard-ai/switchboard/internal/gwtest"
)

// These tests run the whole gateway (wired as `switchboard serve` wires it)
// with server-everything as an agent's MCP server, on the scripted fake
// upstream: the model calls the server's tool and answers from its result.

// deskYAML is triage handing off to billing, whose MCP server is server, a
// YAML mapping; graph desk is billing alone.
func deskYAML(server string) string {
	return `
providers:
  fake: {base_url: "${FAKE_URL}", timeout: 10s}
telemetry:
  otlp_endpoint: "${COLLECTOR_URL}"
mcp_servers:
  everything: ` + server + `
agents:
  triage:
    description: Routes the user to the right desk
    instructions: You are the triage desk.
    model: fake/triage-model
    handoffs: [billing]
  billing:
    description: Answers questions about charges
    instructions: You are the billing desk.
    model: fake/billing-model
    mcp: [everything]
graphs:
  support: {lead: triage}
  desk: {lead: billing}
`
}

// echoing scripts the model: it calls echo with the user's message, then
// answers with the tool's result, whatever it was. The answer comes from
// the result, so a test sees exactly what the tool gave the model.
func echoing(r fakeupstream.Request) fakeupstream.Reply {
	msgs := r.Parsed.Messages
	if last := msgs[len(msgs)-1]; last.Role == "tool" && last.ToolCallID == "call_echo" {
		return fakeupstream.Reply{Text: "The server said: " + last.Text()}
	}
	var user string
	for _, m := range msgs {
		if m.Role == "user" {
			user = m.Text()
		}
	}
	args, _ := json.Marshal(map[string]string{"message": user})
	return fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{{ID: "call_echo", Name: "echo", Arguments: string(args)}}}
}

// startDesk starts a gateway on deskYAML(server) in front of a fake upstream
// that answers with echoing.
func startDesk(t *testing.T, server string, env map[string]string) (*gwtest.Gateway, *fakeupstream.Server) {
	t.Helper()
	fake := fakeupstream.New(t)
	fake.SetFallback(echoing)
	all := map[string]string{"FAKE_URL": fake.URL, "COLLECTOR_URL": ""}
	for k, v := range env {
		all[k] = v
	}
	return gwtest.Start(t, deskYAML(server), all), fake
}

// chat sends one user message to graph and returns the reply's text and
// agent.
func chat(t *testing.T, gw *gwtest.Gateway, graph, text string) (string, string) {
	t.Helper()
	resp := gw.Chat(map[string]any{"model": graph, "messages": []map[string]string{{"role": "user", "content": text}}}, nil)
	if resp.Status != http.StatusOK {
		t.Fatalf("chat: %d %s", resp.Status, resp.Body)
	}
	var c gwtest.Completion
	resp.Decode(t, &c)
	if c.Choices[0].Message.Content == nil {
		t.Fatalf("a reply without content: %s", resp.Body)
	}
	return *c.Choices[0].Message.Content, c.Metadata.AgentName
}

func TestAgentCallsEverythingOverStdioWithNpx(t *testing.T) {
	needEverything(t)
	// As a user would write it; npx finds the package installed next to
	// this test (the gateway runs in this folder) and needs no network.
	gw, fake := startDesk(t, `{command: [npx, -y, "@modelcontextprotocol/server-everything"]}`, nil)
	text, agent := chatHandoff(t, gw, fake)
	if text != "The server said: Echo: refund order 42" || agent != "billing" {
		t.Errorf("reply = %q by %s, want billing answering from echo's result", text, agent)
	}
}

func TestAgentCallsEverythingOverHTTP(t *testing.T) {
	e := needEverything(t)
	srv := e.startHTTP(t, 0)
	gw, fake := startDesk(t, `{url: "`+srv.url()+`"}`, nil)
	text, agent := chatHandoff(t, gw, fake)
	if text != "The server said: Echo: refund order 42" || agent != "billing" {
		t.Errorf("reply = %q by %s, want billing answering from echo's result", text, agent)
	}
}

// chatHandoff runs support: triage hands off to billing, which calls echo
// and answers. It checks what billing was offered and what echo returned.
func chatHandoff(t *testing.T, gw *gwtest.Gateway, fake *fakeupstream.Server) (string, string) {
	t.Helper()
	fake.Push(fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{{ID: "call_h", Name: "transfer_to_billing", Arguments: `{"reason":"refund"}`}}})
	text, agent := chat(t, gw, "support", "refund order 42")
	reqs := fake.Requests()
	if len(reqs) != 3 {
		t.Fatalf("the upstream got %d requests, want triage, billing, billing", len(reqs))
	}
	var triageTools, billingTools []string
	for _, tool := range reqs[0].Parsed.Tools {
		triageTools = append(triageTools, tool.Function.Name)
	}
	for _, tool := range reqs[1].Parsed.Tools {
		billingTools = append(billingTools, tool.Function.Name)
		if tool.Function.Name == "get-sum" && !strings.Contains(string(tool.Function.Parameters), `"a"`) {
			t.Errorf("get-sum's parameters = %s, want the server's input schema", tool.Function.Parameters)
		}
	}
	if slices.Contains(triageTools, "echo") {
		t.Errorf("triage, without mcp, is offered %v", triageTools)
	}
	for _, want := range []string{"echo", "get-sum"} {
		if !slices.Contains(billingTools, want) {
			t.Errorf("billing is offered %v, without %s", billingTools, want)
		}
	}
	return text, agent
}

func TestKilledHTTPServerGivesToolFailedAndComesBack(t *testing.T) {
	e := needEverything(t)
	srv := e.startHTTP(t, 0)
	gw, _ := startDesk(t, `{url: "`+srv.url()+`", timeout: 10s}`, nil)
	if text, _ := chat(t, gw, "desk", "one"); text != "The server said: Echo: one" {
		t.Fatalf("before the kill: %q", text)
	}
	srv.kill(t)
	text, _ := chat(t, gw, "desk", "two")
	var toolErr struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(text, "The server said: ")), &toolErr); err != nil || toolErr.Error.Code != "tool_failed" {
		t.Fatalf("with the server killed the tool result is %q, want a tool_failed error", text)
	}
	if strings.Contains(toolErr.Error.Message, "127.0.0.1") {
		t.Errorf("the tool error tells the model an address: %s", toolErr.Error.Message)
	}
	e.startHTTP(t, srv.port)
	eventually(t, "echo once the server is back", func() error {
		if text, _ := chat(t, gw, "desk", "three"); text != "The server said: Echo: three" {
			return fmt.Errorf("reply %q", text)
		}
		return nil
	})
}

func TestKilledStdioServerIsStartedAgain(t *testing.T) {
	e := needEverything(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	// The shell stays the gateway's child and node its grandchild, as with
	// npx: the pid file names the shell, whose group holds both.
	cmd := fmt.Sprintf(`{command: [sh, -c, 'echo $$ >> %s; node %s stdio']}`, pidFile, e.entry)
	gw, _ := startDesk(t, cmd, nil)
	if text, _ := chat(t, gw, "desk", "one"); text != "The server said: Echo: one" {
		t.Fatalf("before the kill: %q", text)
	}
	first := pids(t, pidFile)[0]
	killGroup(t, first)
	eventually(t, "echo from a new server process", func() error {
		if text, _ := chat(t, gw, "desk", "two"); text != "The server said: Echo: two" {
			return fmt.Errorf("reply %q", text)
		}
		return nil
	})
	started := pids(t, pidFile)
	if len(started) < 2 {
		t.Fatalf("the server was started %d times, want again after the kill", len(started))
	}
	gw.Close()
	for _, pid := range started {
		if left := groupMembers(t, pid); len(left) > 0 {
			t.Errorf("after shutdown, processes %v of server group %d still run", left, pid)
		}
	}
}

func TestExecuteToolSpanNamesTheServer(t *testing.T) {
	e := needEverything(t)
	coll := newCollector(t)
	gw, _ := startDesk(t, e.stdioServer(), map[string]string{"COLLECTOR_URL": coll.url})
	if text, _ := chat(t, gw, "desk", "traced"); text != "The server said: Echo: traced" {
		t.Fatalf("reply %q", text)
	}
	gw.Close() // flushes the spans
	span := coll.span(t, "execute_tool echo")
	for k, want := range map[string]string{"switchboard.mcp.server": "everything", "gen_ai.tool.name": "echo", "gen_ai.tool.call.id": "call_echo"} {
		if got := span[k]; got != want {
			t.Errorf("execute_tool echo: %s = %q, want %q (attributes %v)", k, got, want, span)
		}
	}
}

// pids reads the pids the wrapper shell wrote, one per start.
func pids(t *testing.T, file string) []int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("pid file: %q", b)
		}
		out = append(out, n)
	}
	return out
}

// groupMembers lists the live processes (zombies aside) of process group
// pgid, read from /proc.
func groupMembers(t *testing.T, pgid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skip("no /proc")
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) < 3 || fields[0] == "Z" || fields[0] == "X" {
			continue
		}
		if g, _ := strconv.Atoi(fields[2]); g == pgid {
			out = append(out, pid)
		}
	}
	return out
}

// killGroup kills a process group at once, as a crash would.
func killGroup(t *testing.T, pgid int) {
	t.Helper()
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill server group %d: %v", pgid, err)
	}
}

func TestClientToolNamedLikeAnMCPToolIs400(t *testing.T) {
	e := needEverything(t)
	gw, _ := startDesk(t, e.stdioServer(), nil)
	resp := gw.Chat(map[string]any{
		"model":    "desk",
		"messages": []map[string]string{{"role": "user", "content": "hi"}},
		"tools":    []map[string]any{{"type": "function", "function": map[string]any{"name": "echo", "parameters": map[string]any{"type": "object"}}}},
	}, nil)
	if resp.Status != http.StatusBadRequest || !strings.Contains(string(resp.Body), `client tool \"echo\" clashes`) {
		t.Errorf("a client tool named echo = %d %s, want 400 naming the clash", resp.Status, resp.Body)
	}
}
