package mcptools

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-ai/switchboard/graphs"
)

// This file starts and stops the process of a stdio server. The gateway
// owns it: it runs in a process group of its own (on Unix), so that closing
// the server also ends what it started (npx starts node, which may start
// more), and no process outlives the gateway's shutdown.

// stopGrace is how long a server gets to exit after its stdin is closed,
// and again after SIGTERM, before it is killed.
const stopGrace = 2 * time.Second

// process is one running stdio server.
type process struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser // the server's stdin, our end
	stdout io.ReadCloser  // the server's stdout, our end
	exited chan struct{}  // closed once the process has been reaped
	stderr *stderrTail
	stop   sync.Once
}

// startProcess starts cfg's command with its pipes. The SDK speaks MCP over
// stdin and stdout; stderr is logged at debug level, its last line kept for
// the warning of a server that fails to start.
func startProcess(cfg *graphs.MCPServer, log *slog.Logger) (*process, error) {
	cmd := exec.Command(cfg.Command[0], cfg.Command[1:]...)
	cmd.Env = childEnv(os.Environ(), cfg.Env)
	cmd.SysProcAttr = ownProcessGroup()
	// Our own pipes, not cmd's: Wait must not wait for a grandchild that
	// keeps stderr open, nor close stdout under the SDK's reader.
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW)
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW, outR, outW)
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if err := cmd.Start(); err != nil {
		closeAll(inR, inW, outR, outW, errR, errW)
		return nil, fmt.Errorf("start %s: %w", cfg.Command[0], err)
	}
	closeAll(inR, outW, errW)
	p := &process{cmd: cmd, stdin: inW, stdout: outR, exited: make(chan struct{}), stderr: &stderrTail{}}
	go p.stderr.read(errR, log)
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// Stop ends the process and everything it started: stdin closed first (the
// MCP way to ask a stdio server to exit), then SIGTERM, then SIGKILL, each
// after stopGrace; then the same for whatever is left of its group. It
// returns once the process is reaped. Safe to call more than once.
func (p *process) Stop() {
	p.stop.Do(func() {
		_ = p.stdin.Close()
		_ = p.stdout.Close()
		if !p.waitExit(stopGrace) {
			_ = p.cmd.Process.Signal(terminateSignal)
			if !p.waitExit(stopGrace) {
				_ = p.cmd.Process.Kill()
				<-p.exited
			}
		}
		stopGroup(p.cmd.Process.Pid, stopGrace)
	})
}

// waitExit waits up to d for the process to exit.
func (p *process) waitExit(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-t.C:
		return false
	}
}

// Pid is the process id, for logs and tests.
func (p *process) Pid() int { return p.cmd.Process.Pid }

func closeAll(cs ...io.Closer) {
	for _, c := range cs {
		_ = c.Close()
	}
}

// stderrTail logs a server's stderr lines and keeps the last one.
type stderrTail struct {
	mu   sync.Mutex
	last string
}

// maxStderrLine bounds a logged stderr line; the rest of it is dropped.
const maxStderrLine = 1024

func (s *stderrTail) read(r io.ReadCloser, log *slog.Logger) {
	defer r.Close()
	br := bufio.NewReaderSize(r, maxStderrLine)
	for {
		line, isPrefix, err := br.ReadLine()
		if len(line) > 0 {
			text := strings.ToValidUTF8(string(line), "?")
			log.Debug("mcp server stderr", "line", text)
			s.mu.Lock()
			s.last = text
			s.mu.Unlock()
		}
		for isPrefix && err == nil { // the rest of a long line
			_, isPrefix, err = br.ReadLine()
		}
		if err != nil {
			return
		}
	}
}

// Last returns the last line the server wrote to stderr.
func (s *stderrTail) Last() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// secretMarkers are the parts of an environment variable's name that keep it
// from a stdio server: the gateway's provider keys and store passwords are
// not a tool server's business. Pass what a server needs with `env:`.
var secretMarkers = []string{"KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "COOKIE"}

// childEnv is a stdio server's environment: the gateway's, minus what looks
// like a secret and the gateway's own settings, plus the server's `env:`.
func childEnv(parent []string, extra map[string]string) []string {
	out := make([]string, 0, len(parent)+len(extra))
	for _, kv := range parent {
		name, _, _ := strings.Cut(kv, "=")
		if _, override := extra[name]; override || secretName(name) {
			continue
		}
		out = append(out, kv)
	}
	for k, v := range extra {
		out = append(out, k+"="+v)
	}
	return out
}

// secretName reports whether an environment variable's name suggests a
// secret, or is one of the gateway's own settings (a store URL may hold a
// password).
func secretName(name string) bool {
	upper := strings.ToUpper(name)
	if strings.HasPrefix(upper, "SWITCHBOARD_") {
		return true
	}
	for _, m := range secretMarkers {
		if strings.Contains(upper, m) {
			return true
		}
	}
	return false
}
