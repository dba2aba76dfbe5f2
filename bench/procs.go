package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-ai/switchboard/internal/syncbuf"
)

// build compiles the gateway and the reverse proxy into dir.
func build(ctx context.Context, root, dir string) (gateway, revproxy string, err error) {
	gateway, revproxy = filepath.Join(dir, "switchboard"), filepath.Join(dir, "revproxy")
	for _, b := range [][2]string{{gateway, "./cmd/switchboard"}, {revproxy, "./bench/revproxy"}} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", b[0], b[1])
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", "", fmt.Errorf("go build %s: %w\n%s", b[1], err, out)
		}
	}
	return gateway, revproxy, nil
}

// proc is a child process under test: a gateway or the reverse proxy.
type proc struct {
	name string
	cmd  *exec.Cmd
	base string // http://127.0.0.1:port
	log  syncbuf.Buffer
}

// start runs bin with args, where "{addr}" becomes 127.0.0.1:0, reads the
// address the child listens on from its log (listenedOn), and waits until
// GET /metrics answers. A port picked here and released for the child
// could be taken by any socket before the child bound it. The child gets a
// clean environment so that no SWITCHBOARD_* or OTEL_* variable of the
// caller changes what is measured.
func start(name, bin string, args ...string) (*proc, error) {
	return startEnv(name, bin, nil, args...)
}

// startEnv is start with env ("KEY=value") added to the child's clean
// environment.
func startEnv(name, bin string, env []string, args ...string) (*proc, error) {
	for i, a := range args {
		args[i] = strings.ReplaceAll(a, "{addr}", "127.0.0.1:0")
	}
	p := &proc{name: name}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.log, &p.log
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if p.base == "" {
			addr, ok := listenedOn(p.log.String())
			if !ok {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			p.base = "http://" + addr
		}
		resp, err := http.Get(p.base + "/metrics")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.stop()
	return nil, fmt.Errorf("%s did not come up: %s", name, p.log.String())
}

// stop ends the process (SIGINT first, so that a gateway shuts down cleanly).
func (p *proc) stop() {
	if p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

// listenedOn returns the address of the first JSON log line whose message
// says the process is listening ("switchboard listening", "revproxy
// listening", ...), once the log holds one.
//
// The line may follow part of a collection's trace line (gcTraceEnv): the
// runtime writes such a line in pieces, a write each, and the log line
// written in one between two of them ends up after the first piece.
func listenedOn(log string) (string, bool) {
	for line := range strings.Lines(log) {
		i := strings.IndexByte(line, '{')
		if i < 0 {
			continue
		}
		var rec struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal([]byte(line[i:]), &rec) == nil && strings.HasSuffix(rec.Msg, " listening") && rec.Addr != "" {
			return rec.Addr, true
		}
	}
	return "", false
}

// cpu is the process's CPU time so far (user + system), summed over its
// threads from /proc/<pid>/task/*/schedstat, which counts nanoseconds where
// /proc/<pid>/stat counts 10 ms ticks.
func (p *proc) cpu() (time.Duration, error) {
	dir := fmt.Sprintf("/proc/%d/task", p.cmd.Process.Pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", dir, err)
	}
	var total time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, t.Name(), "schedstat"))
		if err != nil {
			continue // the thread exited
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			continue
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse schedstat: %w", err)
		}
		total += time.Duration(ns)
	}
	return total, nil
}

// syscalls is how many read and write system calls the process made so
// far, of every kind of file (syscr and syscw of /proc/<pid>/io).
func (p *proc) syscalls() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	var n int64
	found := 0
	for line := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ": ")
		if !ok || (k != "syscr" && k != "syscw") {
			continue
		}
		c, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse /proc io %s: %w", k, err)
		}
		n += c
		found++
	}
	if found != 2 {
		return 0, errors.New("no syscr and syscw in /proc io")
	}
	return n, nil
}

// rss is the process's resident set size in bytes (VmRSS).
func (p *proc) rss() (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS in /proc status")
}

// metrics reads the process's /metrics in one scrape: every sample,
// keyed by its name and labels as written (name{label="v"}).
func (p *proc) metrics() (map[string]float64, error) {
	resp, err := http.Get(p.base + "/metrics")
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", p.name, err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("scrape %s: %w", p.name, err)
	}
	if _, ok := out[mallocs]; !ok {
		return nil, fmt.Errorf("scrape %s: no %s", p.name, mallocs)
	}
	return out, nil
}
