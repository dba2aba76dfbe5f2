// Command redteam replays the findings of issue 23 against a built gateway
// (CONTRACT §14) and prints which bounds held. It runs the gateway binary
// it is given on loopback, in front of its own hostile upstream (upstream.go),
// with small limits so that every check is over in seconds; each check is
// bounded in connections and time. By hand: make redteam.
//
//	go run ./tools/redteam -gateway bin/switchboard
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/switchboard-ai/switchboard/internal/syncbuf"
)

// Secrets planted where the gateway must not repeat them.
const (
	apiKey      = "red-key-0123456789"
	providerKey = "sk-redteam-PROVIDERKEY0042"
	storePass   = "redis-pw-LEAK0042"
	prompt      = "redteam-prompt-SECRET-7731 please answer"
)

// result is one row of the report.
type result struct {
	finding string
	held    bool
	saw     string
}

func main() {
	bin := flag.String("gateway", "bin/switchboard", "the gateway binary to attack")
	flag.Parse()
	if err := run(*bin); err != nil {
		fmt.Fprintln(os.Stderr, "redteam:", err)
		os.Exit(2)
	}
}

func run(bin string) error {
	h := &hostile{}
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer up.Close()
	go http.Serve(up, h)

	dir, err := os.MkdirTemp("", "redteam")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg := filepath.Join(dir, "redteam.yaml")
	if err := os.WriteFile(cfg, []byte(config(up.Addr().String())), 0o600); err != nil {
		return err
	}
	gw, err := startGateway(bin, cfg)
	if err != nil {
		return err
	}
	defer gw.kill()

	var results []result
	add := func(r result) {
		results = append(results, r)
		mark := "HELD  "
		if !r.held {
			mark = "FAILED"
		}
		fmt.Printf("%s  %-44s %s\n", mark, r.finding, r.saw)
	}
	add(checkIdle(gw))
	add(checkSlowBody(gw))
	add(checkSilentStream(gw, h))
	add(checkTrickle(gw))
	add(checkHugeAnswers(gw))
	add(checkSessionSize(gw))
	add(checkFanout(gw, h))
	add(checkEchoes(gw))
	add(checkAddresses(gw))
	add(checkSmall(gw))
	add(checkDrain(gw))
	add(checkLogs(gw))

	failed := 0
	for _, r := range results {
		if !r.held {
			failed++
		}
	}
	fmt.Printf("\n%d of %d held\n", len(results)-failed, len(results))
	if failed > 0 {
		os.Exit(1)
	}
	return nil
}

// config is the gateway's config: small limits, one graph per hostile
// model, named after it.
func config(upstream string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `server:
  api_keys: [{name: red, key: %q}]
  read_timeout: 1s
  idle_timeout: 1s
  stream_write_timeout: 1s
  drain_timeout: 10s
store:
  url: "memory://:%s@localhost"
  max_session_bytes: 1048576
providers:
  hostile: {base_url: "http://%s/v1", api_key: %q, timeout: 3s, stream_idle_timeout: 2s, max_retries: 0, max_response_bytes: 4194304}
tools:
  work: {http: {url: "http://%s/tool", timeout: 5s}}
agents:
`, apiKey, storePass, upstream, providerKey, upstream)
	models := []string{"ok", "echo-auth", "echo-body", "reset", "huge", "longline", "trickle", "flood", "slow", "fanout"}
	for _, m := range models {
		tools := ""
		if m == "fanout" {
			tools = ", tools: [work]"
		}
		fmt.Fprintf(&b, "  a-%s: {model: hostile/%s%s}\n", m, m, tools)
	}
	b.WriteString("graphs:\n")
	for _, m := range models {
		fmt.Fprintf(&b, "  %s: {lead: a-%s}\n", m, m)
	}
	return b.String()
}

// gateway is the running gateway process.
type gateway struct {
	cmd  *exec.Cmd
	addr string
	log  *syncbuf.Buffer
}

// startGateway runs the gateway on a port the kernel picks and reads the
// address from its "switchboard listening" log line: a port picked here
// and released for the gateway could be taken by any socket meanwhile.
func startGateway(bin, cfg string) (*gateway, error) {
	g := &gateway{log: &syncbuf.Buffer{}}
	g.cmd = exec.Command(bin, "serve", "--config", cfg, "--listen", "127.0.0.1:0")
	g.cmd.Stdout, g.cmd.Stderr = g.log, g.log
	if err := g.cmd.Start(); err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if g.addr == "" {
			g.addr = listeningAddr(g.log.String())
			continue
		}
		if resp, err := http.Get("http://" + g.addr + "/healthz"); err == nil {
			resp.Body.Close()
			return g, nil
		}
	}
	g.kill()
	return nil, fmt.Errorf("the gateway did not start:\n%s", g.log.String())
}

// listeningAddr is the address of the gateway's "switchboard listening"
// log line, or "" before it is written.
func listeningAddr(log string) string {
	for line := range strings.Lines(log) {
		var rec struct{ Msg, Addr string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "switchboard listening" {
			return rec.Addr
		}
	}
	return ""
}

func (g *gateway) kill() {
	if g.cmd.ProcessState == nil {
		_ = g.cmd.Process.Kill()
		_ = g.cmd.Wait()
	}
}

// rss is the gateway's resident memory, in bytes.
func (g *gateway) rss() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", g.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(v), "%d", &kb)
			return kb << 10
		}
	}
	return 0
}

// reply is an answer of the gateway.
type reply struct {
	status int
	body   string
	err    error
}

// post sends a chat completion for graph with headers and extra fields.
func (g *gateway) post(ctx context.Context, body string, header map[string]string) reply {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+g.addr+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+apiKey)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return reply{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return reply{status: resp.StatusCode, body: string(b), err: err}
}

// chat is a one-message request body.
func chat(graph, text string, stream bool) string {
	return fmt.Sprintf(`{"model":%q,"stream":%v,"messages":[{"role":"user","content":%q}]}`, graph, stream, text)
}

// sigterm asks the gateway to shut down.
func (g *gateway) sigterm() { _ = g.cmd.Process.Signal(syscall.SIGTERM) }
