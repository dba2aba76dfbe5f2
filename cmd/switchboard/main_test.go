package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-ai/switchboard/internal/gwtest"
	"github.com/switchboard-ai/switchboard/internal/listen"
)

func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func writeConfig(t *testing.T, yaml string) string {
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const badConfig = `
agents:
  triage:
    description: Routes
    model: nosuch/model
    tools: [missing_tool]
    handoffs: [billing]
graphs:
  support: {lead: triage}
  other: {lead: ghost}
`

func TestValidate(t *testing.T) {
	t.Setenv("CHARGES_URL", "http://127.0.0.1:7000/charges")
	code, out, errOut := runCLI("validate", "--config", "../../examples/support.yaml")
	if code != 0 {
		t.Fatalf("examples/support.yaml: exit %d\n%s", code, errOut)
	}
	for _, want := range []string{"graph support", "escalate_refund -> refunds", "transfer_to_billing -> billing", "lookup_charges"} {
		if !strings.Contains(out, want) {
			t.Errorf("validate output lacks %q:\n%s", want, out)
		}
	}

	code, out, errOut = runCLI("validate", "--config", writeConfig(t, badConfig))
	if code != 1 {
		t.Fatalf("bad config: exit %d", code)
	}
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if len(lines) < 4 {
		t.Errorf("want one line per problem, got:\n%s", errOut)
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "config invalid: ") {
			t.Errorf("line %q does not start with 'config invalid: '", l)
		}
	}
	for _, want := range []string{`"nosuch"`, `"missing_tool"`, `"billing"`, `"ghost"`} {
		if !strings.Contains(errOut, want) {
			t.Errorf("problems do not name %s:\n%s", want, errOut)
		}
	}
	if out != "" {
		t.Errorf("nothing on stdout for an invalid config, got %q", out)
	}
}

// serve refuses an invalid config before listening.
func TestServeRefusesInvalidConfig(t *testing.T) {
	code, _, errOut := runCLI("serve", "--config", writeConfig(t, badConfig), "--listen", "127.0.0.1:0")
	if code == 0 || !strings.HasPrefix(errOut, "config invalid: ") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

func TestGraphDiagram(t *testing.T) {
	code, out, _ := runCLI("graph", "--model", "support")
	if code != 0 || !strings.HasPrefix(out, "flowchart LR") || !strings.Contains(out, "transfer_to_billing") {
		t.Errorf("mermaid: exit %d\n%s", code, out)
	}
	// The support desk's refund is behind ask: its edge says so, and
	// only its edge.
	t.Setenv("CHARGES_URL", "http://127.0.0.1:7000/charges")
	code, out, errOut := runCLI("graph", "--config", "../../examples/support.yaml")
	if code != 0 || !strings.Contains(out, `-->|"escalate_refund (ask)"|`) || strings.Count(out, "(ask)") != 1 {
		t.Errorf("support desk: exit %d %s\n%s", code, errOut, out)
	}
	code, out, _ = runCLI("graph", "--config", "../../examples/support.yaml", "--format", "dot")
	if code != 0 || !strings.Contains(out, `[label="escalate_refund (ask)"]`) || !strings.Contains(out, `[label="transfer_to_billing"]`) {
		t.Errorf("support desk, dot: exit %d\n%s", code, out)
	}
	code, out, errOut = runCLI("graph", "--format", "dot")
	if code != 0 || !strings.HasPrefix(out, "digraph") || errOut != "" {
		t.Errorf("dot: exit %d %q\n%s", code, errOut, out)
	}
	// A config of several graphs: without --model the first by name is
	// drawn, and stderr names the others.
	two := writeConfig(t, "agents:\n  a: {description: A, instructions: A., model: demo/switchboard-demo}\ngraphs:\n  zeta: {lead: a}\n  alpha: {lead: a}\n")
	code, out, errOut = runCLI("graph", "--config", two, "--format", "dot")
	if code != 0 || !strings.HasPrefix(out, `digraph "alpha"`) || !strings.Contains(errOut, "choose with --model NAME") || !strings.Contains(errOut, "zeta") {
		t.Errorf("two graphs: exit %d %q\n%s", code, errOut, out)
	}
	if code, _, _ = runCLI("graph", "--format", "png"); code == 0 {
		t.Error("unknown format accepted")
	}
	if code, _, _ = runCLI("graph", "--model", "nope"); code == 0 {
		t.Error("unknown model accepted")
	}
}

func TestUsage(t *testing.T) {
	if code, _, _ := runCLI(); code != 2 {
		t.Errorf("no command: exit %d", code)
	}
	if code, _, _ := runCLI("frobnicate"); code != 2 {
		t.Errorf("unknown command: exit %d", code)
	}
	// A config path without --config is not silently ignored.
	if code, out, errOut := runCLI("validate", "config.yaml"); code != 2 || out != "" || !strings.Contains(errOut, `unexpected argument "config.yaml"`) {
		t.Errorf("a stray argument: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// The built-in demo routes a newcomer's first curl to billing, offline.
func TestBuiltinDemoRoutes(t *testing.T) {
	cfg, err := load("")
	if err != nil {
		t.Fatal(err)
	}
	gw := gwtest.StartConfig(t, cfg)
	tests := []struct{ text, agent string }{
		{"I was charged twice for my subscription", "billing"},
		{"The app crashes at login", "tech-support"},
		{"Hello there", "triage"},
	}
	for _, tt := range tests {
		r := gw.Chat(gwtest.User("support", tt.text), nil)
		if r.Status != http.StatusOK {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		var c gwtest.Completion
		r.Decode(t, &c)
		if c.Metadata.AgentName != tt.agent || !strings.Contains(c.Text(), tt.text) {
			t.Errorf("%q: answered by %q: %q", tt.text, c.Metadata.AgentName, c.Text())
		}
	}
}

func TestMissingConfigFile(t *testing.T) {
	code, _, errOut := runCLI("validate", "--config", filepath.Join(t.TempDir(), "nope.yaml"))
	if code != 1 || !strings.HasPrefix(errOut, "config invalid: ") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

// The environment overrides of docs/config.md reach the command's config.
func TestEnvironmentOverrides(t *testing.T) {
	t.Setenv("SWITCHBOARD_LISTEN", "127.0.0.1:18181")
	t.Setenv("SWITCHBOARD_STORE_URL", "redis://127.0.0.1:6379/3")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
	t.Setenv("OTEL_SERVICE_NAME", "sb-test")
	cfg, err := load("")
	if err != nil {
		t.Fatal(err)
	}
	got := []string{cfg.Server.Listen, cfg.Store.URL, cfg.Telemetry.OTLPEndpoint, cfg.Telemetry.ServiceName}
	want := []string{"127.0.0.1:18181", "redis://127.0.0.1:6379/3", "http://127.0.0.1:4318", "sb-test"}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("override %d: got %q, want %q", i, got[i], want[i])
		}
	}
}

// A sub-agent cycle (A asks B asks A) makes validate exit 1, naming it.
func TestValidateSubagentCycle(t *testing.T) {
	code, out, errOut := runCLI("validate", "--config", writeConfig(t, `
agents:
  a: {model: demo/echo, description: A, subagents: [b]}
  b: {model: demo/echo, description: B, subagents: [a]}
graphs: {g: {lead: a}}
`))
	if code != 1 || out != "" || !strings.Contains(errOut, `config invalid: agent "a": sub-agent cycle a asks b asks a`) {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// A store URL that no store could open fails validate and serve with a
// config invalid line, the file's as SWITCHBOARD_STORE_URL's, and never
// shows its password.
func TestValidateStoreURL(t *testing.T) {
	demo, err := os.ReadFile("../../examples/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	bad := "store:\n  url: \"redis://:s3cr3tpw@127.0.0.1:notaport/0\"\n" + string(demo)
	for _, args := range [][]string{
		{"validate", "--config", writeConfig(t, bad)},
		{"serve", "--config", writeConfig(t, bad), "--listen", "127.0.0.1:0"},
	} {
		code, out, errOut := runCLI(args...)
		if code != 1 || out != "" || !strings.HasPrefix(errOut, "config invalid: store.url: ") || strings.Contains(errOut, "s3cr3tpw") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", args[0], code, out, errOut)
		}
	}
	// With other problems, the store's is reported with them.
	other := strings.Replace(bad, "agents:\n", "agents:\n  extra:\n    model: demo/echo\n    tools: [nope]\n", 1)
	if code, _, errOut := runCLI("validate", "--config", writeConfig(t, other)); code != 1 || !strings.Contains(errOut, `unknown tool "nope"`) || !strings.Contains(errOut, "config invalid: store.url: ") {
		t.Errorf("with another problem: exit %d, stderr %q", code, errOut)
	}
	t.Setenv("SWITCHBOARD_STORE_URL", "redis-sentinel://s1,s2/0")
	if code, _, errOut := runCLI("validate"); code != 1 || !strings.Contains(errOut, "config invalid: store.url: ") || !strings.Contains(errOut, "master") {
		t.Errorf("SWITCHBOARD_STORE_URL: exit %d, stderr %q", code, errOut)
	}
}

// A config problem that quotes a URL quotes it without its password or a
// secret query parameter, whichever setting holds it (CONTRACT §14).
func TestConfigProblemsMaskCredentials(t *testing.T) {
	demo, err := os.ReadFile("../../examples/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for name, yaml := range map[string]string{
		"a sentinel password":         "store:\n  url: \"redis-sentinel://h:1?master=m&sentinel_password=pwsecret1&bogus=2\"\n" + string(demo),
		"a password parameter":        "store:\n  url: \"redis://h:1/0?db=x&password=pwsecret1\"\n" + string(demo),
		"a provider's base_url":       "providers:\n  extra: {base_url: \"http://u:pwsecret1@127.0.0.1:notaport/v1\"}\n" + string(demo),
		"a collector's otlp_endpoint": "telemetry:\n  otlp_endpoint: \"ftp://u:pwsecret1@127.0.0.1:4318\"\n" + string(demo),
	} {
		code, _, errOut := runCLI("validate", "--config", writeConfig(t, yaml))
		if code != 1 || !strings.Contains(errOut, "config invalid: ") || strings.Contains(errOut, "pwsecret1") {
			t.Errorf("%s: exit %d, stderr %q", name, code, errOut)
		}
	}
}

// TestServeOutputIsItsLog: what serve writes is its JSON log from the first
// line on. Tools read the address it listens on from that log (the e2e
// suite, the benchmarks), and a package that printed at start-up (gin's
// debug-mode warning, from an engine made at init) broke them.
func TestServeOutputIsItsLog(t *testing.T) {
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.Close() }) // after serve has stopped
	startServe(t, pw, nil)
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatal("serve ended without saying it listens")
			}
			if !json.Valid([]byte(line)) {
				t.Fatalf("serve wrote a line that is not its JSON log: %q", line)
			}
			if strings.Contains(line, `"switchboard listening"`) {
				go func() { // the rest is drained, so that serve never blocks on the pipe
					for range lines {
					}
				}()
				return
			}
		case <-timeout:
			t.Fatal("serve did not say it listens within 30s")
		}
	}
}

// startServe builds the switchboard binary and runs `serve` at a free
// port, with args after it (none: the built-in demo), its output to out
// and env added to the test's environment, until the test ends.
func startServe(t *testing.T, out io.Writer, args []string, env ...string) *os.Process {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "switchboard")
	if b, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	cmd := exec.Command(bin, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	})
	return cmd.Process
}

// serveLog returns a file for serve's output and its path.
func serveLog(t *testing.T) (*os.File, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "serve.log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, path
}

// listenAddr waits until the log at logPath says where serve listens.
func listenAddr(t *testing.T, logPath string) string {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		log, _ := os.ReadFile(logPath)
		for line := range strings.Lines(string(log)) {
			var rec struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "switchboard listening" {
				return rec.Addr
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not say it listens within 30s: %s", log)
		}
	}
}

// TestServeKeepsTheOperatorsGOGC: serve tunes the collector only when GOGC
// is not set (internal/gctune); an operator's GOGC is what /metrics shows
// (go_gc_gogc_percent), not the tuner's start at 100.
func TestServeKeepsTheOperatorsGOGC(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs it: not in -short")
	}
	logFile, logPath := serveLog(t)
	startServe(t, logFile, nil, "GOGC=50")
	resp, err := http.Get("http://" + listenAddr(t, logPath) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var got string
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(line, "go_gc_gogc_percent "); ok {
			got = strings.TrimSpace(v)
		}
	}
	if got != "50" {
		t.Errorf("go_gc_gogc_percent %q with GOGC=50 in serve's environment, want 50", got)
	}
}

// TestServeRefusesAnAddressInUse: serve listens on several sockets that
// share its address (internal/listen), and a second serve started on that
// address fails at once, as it did with one socket, instead of joining the
// first and taking half its clients.
func TestServeRefusesAnAddressInUse(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs it: not in -short")
	}
	logFile, logPath := serveLog(t)
	startServe(t, logFile, nil)
	addr := listenAddr(t, logPath)
	code, _, errOut := runCLI("serve", "--listen", addr)
	if code != 1 || !strings.Contains(errOut, "cannot listen") || !strings.Contains(errOut, "address already in use") {
		t.Fatalf("a second serve on %s: exit %d, stderr %q", addr, code, errOut)
	}
	log, _ := os.ReadFile(logPath)
	if want := fmt.Sprintf(`"sockets":%d`, listen.Sockets()); !strings.Contains(string(log), want) {
		t.Errorf("serve's log does not say %s: %s", want, log)
	}
}
