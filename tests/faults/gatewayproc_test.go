package faults_test

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-ai/switchboard/internal/testenv"
)

// gatewayProc is `switchboard serve` running as a child process.
type gatewayProc struct {
	t   *testing.T
	URL string

	cmd     *exec.Cmd
	done    chan struct{} // closed once the process has exited
	waitErr error         // set before done is closed

	mu  sync.Mutex
	log bytes.Buffer
}

// startGatewayProc runs the gateway binary on yaml, on a port the kernel
// picks (read back from its log: testenv.ListeningAddr), and waits until
// it answers /healthz. The process is killed, if still alive, when the
// test ends; its log is shown when the test failed.
func startGatewayProc(t *testing.T, yaml string) *gatewayProc {
	t.Helper()
	bin := needBinary(t)
	cfg := filepath.Join(t.TempDir(), "switchboard.yaml")
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	g := &gatewayProc{t: t, done: make(chan struct{})}
	g.cmd = exec.Command(bin, "serve", "--config", cfg, "--listen", "127.0.0.1:0")
	g.cmd.Env = gatewayEnv()
	g.cmd.SysProcAttr = childAttr()
	w := &lockedWriter{mu: &g.mu, w: &g.log}
	g.cmd.Stdout, g.cmd.Stderr = w, w
	if err := g.cmd.Start(); err != nil {
		t.Fatalf("start gateway: %v", err)
	}
	go func() { g.waitErr = g.cmd.Wait(); close(g.done) }()
	t.Cleanup(func() {
		_ = g.cmd.Process.Kill()
		<-g.done
		if t.Failed() {
			t.Logf("gateway %s log:\n%s", g.URL, g.output())
		}
	})
	c := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(15 * time.Second)
	for {
		if g.URL == "" {
			if addr, ok := testenv.ListeningAddr(g.output()); ok {
				g.URL = "http://" + addr
			}
		}
		if g.URL != "" {
			resp, err := c.Get(g.URL + "/healthz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					c.CloseIdleConnections()
					return g
				}
			}
		}
		select {
		case <-g.done:
			t.Fatalf("gateway exited at start (%v):\n%s", g.waitErr, g.output())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("gateway does not answer /healthz:\n%s", g.output())
		}
	}
}

// gatewayEnv is this process's environment without the overrides that
// would make the gateway ignore its config file.
func gatewayEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "SWITCHBOARD_LISTEN", "SWITCHBOARD_STORE_URL", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_SERVICE_NAME":
			continue
		}
		env = append(env, kv)
	}
	return env
}

// signal sends sig to the gateway process.
func (g *gatewayProc) signal(sig syscall.Signal) {
	g.t.Helper()
	if err := g.cmd.Process.Signal(sig); err != nil {
		g.t.Fatalf("signal gateway: %v", err)
	}
}

// wait waits for the process to exit and returns its exit code; ok is
// false when it did not exit before ctx ended.
func (g *gatewayProc) wait(ctx context.Context) (code int, ok bool) {
	select {
	case <-g.done:
		return g.cmd.ProcessState.ExitCode(), true
	case <-ctx.Done():
		return 0, false
	}
}

func (g *gatewayProc) output() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.log.String()
}
