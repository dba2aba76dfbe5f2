package mcp_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// everything locates the installed server-everything.
type everything struct {
	entry   string // dist/index.js
	preload string // loopback.cjs
}

// needEverything returns the installed server, or skips the test when it is
// not installed, except with CI=true, where the scripts must have installed
// it and its absence fails the test.
func needEverything(t *testing.T) *everything {
	t.Helper()
	d := dir(t)
	e := &everything{
		entry:   filepath.Join(d, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js"),
		preload: filepath.Join(d, "loopback.cjs"),
	}
	_, statErr := os.Stat(e.entry)
	_, nodeErr := exec.LookPath("node")
	if statErr == nil && nodeErr == nil {
		return e
	}
	why := fmt.Sprintf("server-everything is not installed (run bash scripts/mcp-deps.sh): %v", statErr)
	if nodeErr != nil {
		why = fmt.Sprintf("node is not on PATH: %v", nodeErr)
	}
	if os.Getenv("CI") == "true" {
		t.Fatal(why + " (CI=true: the tests must run)")
	}
	t.Skip(why)
	return nil
}

// httpEverything is server-everything serving streamable HTTP on loopback.
type httpEverything struct {
	port   int
	cmd    *exec.Cmd
	exited chan struct{}
}

func (h *httpEverything) url() string { return "http://127.0.0.1:" + strconv.Itoa(h.port) + "/mcp" }

// startHTTP starts the server on 127.0.0.1:port (0: the kernel picks) and
// waits until it listens. The preload keeps it off other interfaces and
// reports the port it got.
func (e *everything) startHTTP(t *testing.T, port int) *httpEverything {
	t.Helper()
	addrFile := filepath.Join(t.TempDir(), "addr")
	var lastErr error
	// A port given back by a killed server may take a moment to be free.
	for range 50 {
		cmd := exec.Command("node", "--require", e.preload, e.entry, "streamableHttp")
		cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port), "LOOPBACK_ADDR_FILE="+addrFile)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if testing.Verbose() {
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() {
			_ = cmd.Wait()
			close(exited)
		}()
		h := &httpEverything{cmd: cmd, exited: exited}
		t.Cleanup(h.stop)
		addr, err := waitAddr(addrFile, exited)
		if err == nil {
			_, p, _ := net.SplitHostPort(addr)
			h.port, _ = strconv.Atoi(p)
			return h
		}
		lastErr = err
		h.stop()
		if port == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("server-everything over HTTP did not start: %v", lastErr)
	return nil
}

// waitAddr waits for the preload to write the address it listens on.
func waitAddr(file string, exited <-chan struct{}) (string, error) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(file); err == nil && len(b) > 0 {
			addr := strings.TrimSpace(string(b))
			if !strings.HasPrefix(addr, "127.0.0.1:") {
				return "", fmt.Errorf("the server listens on %s, not loopback", addr)
			}
			return addr, nil
		}
		select {
		case <-exited:
			return "", fmt.Errorf("the server exited before it listened")
		case <-time.After(50 * time.Millisecond):
		}
	}
	return "", fmt.Errorf("no address after 30s")
}

// kill kills the server at once, as a crash would.
func (h *httpEverything) kill(t *testing.T) {
	t.Helper()
	h.stop()
}

// stop ends the server and whatever it started.
func (h *httpEverything) stop() {
	_ = syscall.Kill(-h.cmd.Process.Pid, syscall.SIGKILL)
	<-h.exited
}
