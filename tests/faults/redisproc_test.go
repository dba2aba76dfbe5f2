package faults_test

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-ai/switchboard/internal/testenv"
)

// redisProc is a private redis-server, a child of the test, that tests may
// stop, continue and kill: the shared Redis on 6379 is never signalled.
// It keeps no data on disk, so a restart starts empty.
type redisProc struct {
	t    *testing.T
	port int

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
	log  bytes.Buffer
}

// startRedis starts a private redis-server on a free port outside the
// kernel's ephemeral range (testenv.PrivatePort: a test restarts it on the
// same port, which no outgoing connection may take meanwhile); it is killed
// when the test ends. Without redis-server on PATH the test is skipped,
// or fails in CI.
func startRedis(t *testing.T) *redisProc {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redis-server is not on PATH (CI=true): %v", err)
		}
		t.Skipf("redis-server is not on PATH: %v", err)
	}
	r := &redisProc{t: t, port: testenv.PrivatePort(t)}
	r.start()
	t.Cleanup(r.kill)
	return r
}

// URL is the store URL of this Redis.
func (r *redisProc) URL() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", r.port) }

// start runs redis-server on r.port and waits until it answers PING.
func (r *redisProc) start() {
	r.t.Helper()
	cmd := exec.Command("redis-server",
		"--port", strconv.Itoa(r.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no")
	cmd.SysProcAttr = childAttr()
	r.mu.Lock()
	r.log.Reset()
	cmd.Stdout, cmd.Stderr = &lockedWriter{mu: &r.mu, w: &r.log}, &lockedWriter{mu: &r.mu, w: &r.log}
	r.mu.Unlock()
	if err := cmd.Start(); err != nil {
		r.t.Fatalf("start redis-server: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	r.mu.Lock()
	r.cmd, r.done = cmd, done
	r.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for !r.ping() {
		select {
		case <-done:
			r.t.Fatalf("redis-server on port %d exited at start:\n%s", r.port, r.output())
		default:
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("redis-server on port %d does not answer PING:\n%s", r.port, r.output())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ping reports whether this Redis answers PING at once.
func (r *redisProc) ping() bool {
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", r.port), 200*time.Millisecond)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && line == "+PONG\r\n"
}

// signal sends sig to this redis-server (and only to it).
func (r *redisProc) signal(sig syscall.Signal) {
	r.t.Helper()
	r.mu.Lock()
	p := r.cmd.Process
	r.mu.Unlock()
	if err := p.Signal(sig); err != nil {
		r.t.Fatalf("signal redis-server: %v", err)
	}
}

// kill kills this redis-server, stopped or not, and waits for it to exit.
func (r *redisProc) kill() {
	r.mu.Lock()
	cmd, done := r.cmd, r.done
	r.mu.Unlock()
	_ = cmd.Process.Kill()
	<-done
}

func (r *redisProc) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.log.String()
}

// lockedWriter serialises writes to a buffer that others read.
type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
