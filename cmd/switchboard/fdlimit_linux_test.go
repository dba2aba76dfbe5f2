package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
)

// TestServeRetriesADialOutOfFiles: a provider call whose connection the
// gateway cannot open for want of a file descriptor waits and retries
// instead of failing the request (providers.localExhaustion). The served
// binary's open-file limit is lowered, while it runs, to one free
// descriptor: the request's own connection takes it, the provider call's
// dial fails with EMFILE, and once the gateway logged its retry the test
// closes an idle connection the gateway held, which frees a descriptor for
// the next attempt.
func TestServeRetriesADialOutOfFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs it: not in -short")
	}
	up := fakeupstream.New(t, fakeupstream.Reply{Text: "through"})
	cfg := writeConfig(t, fmt.Sprintf(`providers:
  fake:
    base_url: %s
    api_key: sk-test
    max_retries: 5 # retries over about 4 s: time enough to see the first one
agents:
  assistant:
    instructions: Answer.
    model: fake/m
graphs:
  g: {lead: assistant}
`, up.URL))
	logFile, logPath := serveLog(t)
	proc := startServe(t, logFile, []string{"--config", cfg})
	addr := listenAddr(t, logPath)

	// A keep-alive connection the gateway holds open once its request is
	// answered: its descriptor is the one the test frees.
	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	if _, err := io.WriteString(idle, "GET /v1/models HTTP/1.1\r\nHost: gateway\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(idle), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("GET /v1/models: %s, connection kept %v; want 200 on a kept connection", resp.Status, !resp.Close)
	}
	setOpenFileLimit(t, proc.Pid, oneFreeFile(t, proc.Pid))

	type answer struct {
		status int
		body   string
		err    error
	}
	answered := make(chan answer, 1)
	go func() {
		c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 20 * time.Second}
		resp, err := c.Post("http://"+addr+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"g","messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			answered <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		answered <- answer{resp.StatusCode, string(b), err}
	}()

	retried := false
	for deadline := time.Now().Add(15 * time.Second); !retried; time.Sleep(5 * time.Millisecond) {
		log, _ := os.ReadFile(logPath)
		for line := range strings.Lines(string(log)) {
			if strings.Contains(line, `"provider call failed, retrying"`) && strings.Contains(line, "the gateway has too many open files") {
				retried = true
			}
		}
		select {
		case a := <-answered:
			if !retried {
				t.Fatalf("answered %d %q (err %v) without a retry for want of a file; log:\n%s", a.status, a.body, a.err, log)
			}
			answered <- a
		default:
		}
		if !retried && time.Now().After(deadline) {
			t.Fatalf("no retry logged within 15s; log:\n%s", log)
		}
	}
	idle.Close()
	a := <-answered
	if a.err != nil || a.status != http.StatusOK || !strings.Contains(a.body, `"content":"through"`) {
		log, _ := os.ReadFile(logPath)
		t.Fatalf("answered %d %q (err %v), want 200 with the provider's answer; log:\n%s", a.status, a.body, a.err, log)
	}
	if n := len(up.Requests()); n != 1 {
		t.Errorf("the provider got %d requests, want 1", n)
	}
	// net/http's own report of the accept that found no descriptor
	// included: serve's output is its JSON log. (A last line still being
	// written is left out.)
	log, _ := os.ReadFile(logPath)
	for line := range strings.Lines(string(log)) {
		if strings.HasSuffix(line, "\n") && !json.Valid([]byte(line)) {
			t.Errorf("serve wrote a line that is not its JSON log: %q", line)
		}
	}
}

// oneFreeFile returns an open-file limit under which process pid has one
// free descriptor: descriptors are numbered from 0, a new one takes the
// lowest free number, and the limit bounds the numbers. The limit is the
// second free number. The idle connection the test frees was the last one
// opened, so it took a number below both.
func oneFreeFile(t *testing.T, pid int) uint64 {
	t.Helper()
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	open := map[uint64]bool{}
	for _, e := range entries {
		n, err := strconv.ParseUint(e.Name(), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		open[n] = true
	}
	free := 0
	for n := uint64(0); ; n++ {
		if !open[n] {
			if free++; free == 2 {
				return n
			}
		}
	}
}

// setOpenFileLimit sets process pid's open-file limit, soft and hard
// (prlimit(2); the syscall package exports no wrapper).
func setOpenFileLimit(t *testing.T, pid int, limit uint64) {
	t.Helper()
	lim := syscall.Rlimit{Cur: limit, Max: limit}
	if _, _, errno := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), syscall.RLIMIT_NOFILE,
		uintptr(unsafe.Pointer(&lim)), 0, 0, 0); errno != 0 {
		t.Fatalf("prlimit: %v", errno)
	}
}
