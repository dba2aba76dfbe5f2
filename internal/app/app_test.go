package app_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/internal/app"
	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
	"github.com/switchboard-ai/switchboard/internal/listen"
	"github.com/switchboard-ai/switchboard/providers"
)

// serve starts a gateway the way `switchboard serve` does, on a loopback
// port, logging to logs; cancelling the returned context is SIGTERM.
func serve(t *testing.T, yaml string, env map[string]string, logs io.Writer) (url string, stop context.CancelFunc, done <-chan error) {
	t.Helper()
	getenv := func(k string) string { return env[k] }
	cfg, err := graphs.Parse([]byte(yaml), providers.Builtin(getenv), getenv)
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(context.Background(), cfg, slog.New(slog.NewJSONHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	// Two sockets, as serve listens on Linux (internal/listen): the drain
	// and the shutdown close both.
	lns, err := listen.Listen("127.0.0.1:0", 2)
	if err != nil {
		t.Fatal(err)
	}
	ln := lns[0]
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		errc <- a.Serve(ctx, lns...)
		close(errc) // the test and the cleanup may both wait for it
	}()
	t.Cleanup(func() {
		cancel()
		<-errc
	})
	return "http://" + ln.Addr().String(), cancel, errc
}

func post(url, text string) (int, string, error) {
	body, _ := json.Marshal(map[string]any{"model": "chat", "messages": []map[string]string{{"role": "user", "content": text}}})
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

const yaml = `
providers:
  fake: {base_url: "${FAKE_URL}"}
agents:
  solo: {model: fake/m}
graphs:
  chat: {lead: solo}
`

func TestDrainRefusesNewRunsWhileOpenOnesFinish(t *testing.T) {
	fake := fakeupstream.New(t, fakeupstream.Reply{Text: "finished in time", Delay: 700 * time.Millisecond}, fakeupstream.Reply{Text: "should not run"})
	url, sigterm, done := serve(t, yaml+"server: {drain_timeout: 20s}\n", map[string]string{"FAKE_URL": fake.URL}, io.Discard)

	type result struct {
		status int
		body   string
		err    error
	}
	open := make(chan result, 1)
	go func() {
		s, b, err := post(url, "the open run")
		open <- result{s, b, err}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := fake.WaitRequests(ctx, 1); err != nil {
		t.Fatal(err)
	}
	sigterm()
	// Draining starts at once (SIGTERM is handled on its own goroutine, so
	// wait for /readyz to say so); a new run is then refused while the open
	// one is still waiting on its provider.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		resp, err := http.Get(url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusServiceUnavailable {
				break
			}
		}
	}
	status, body, _ := post(url, "a new run")
	if status != http.StatusServiceUnavailable || !strings.Contains(body, `"code":"draining"`) {
		t.Errorf("a new run while draining: %d %s", status, body)
	}
	r := <-open
	if r.err != nil || r.status != http.StatusOK || !strings.Contains(r.body, "finished in time") {
		t.Errorf("the open run: %d %s %v", r.status, r.body, r.err)
	}
	if err := <-done; err != nil {
		t.Errorf("serve: %v", err)
	}
	if n := len(fake.Requests()); n != 1 {
		t.Errorf("upstream got %d requests, want only the open run's", n)
	}
}

// A stream still open when the drain timeout passes is ended with an error
// event (503 draining) and [DONE] before its connection closes: the client
// can tell it from a connection cut (CONTRACT §3.1), and the session lock
// and the provider call are released as for any run that ends.
func TestDrainTimeoutEndsOpenStreamsCleanly(t *testing.T) {
	fake := fakeupstream.New(t, fakeupstream.Reply{StreamChunks: []string{"a", "b", "c", "d", "e", "f", "g", "h"}, ChunkDelay: 500 * time.Millisecond})
	url, sigterm, done := serve(t, yaml+"server: {drain_timeout: 1s}\n", map[string]string{"FAKE_URL": fake.URL}, io.Discard)
	body, _ := json.Marshal(map[string]any{"model": "chat", "stream": true, "messages": []map[string]string{{"role": "user", "content": "slow"}}})
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("first line %q: %v", line, err)
	}
	sigterm()
	rest, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("the stream was cut: %v after %q", err, rest)
	}
	if !strings.Contains(string(rest), `"code":"draining"`) || !strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
		t.Errorf("the stream's end: %q", rest)
	}
	if err := <-done; err != nil {
		t.Errorf("serve: %v", err)
	}
}

func TestStoreURLPasswordIsNotLogged(t *testing.T) {
	var logs bytes.Buffer
	// A memory store never parses its URL's password, but the startup line
	// printed the URL as written.
	os.Setenv("SWITCHBOARD_STORE_URL", "")
	_, sigterm, done := serve(t, yaml+"store: {url: \"memory://:hunter2-pw@localhost\"}\n", map[string]string{"FAKE_URL": "http://127.0.0.1:1"}, &logs)
	sigterm()
	<-done
	if strings.Contains(logs.String(), "hunter2-pw") || !strings.Contains(logs.String(), "xxxxx") {
		t.Errorf("logs:\n%s", logs.String())
	}
}

// TestServeAnswersOnEverySocket: serve's sockets share one address and
// the kernel hands each new connection to one of them (internal/listen),
// so a socket nobody accepted on would leave its clients hanging. Clients
// on fresh connections, enough to reach both sockets, all get answers.
func TestServeAnswersOnEverySocket(t *testing.T) {
	fake := fakeupstream.New(t)
	url, _, _ := serve(t, yaml, map[string]string{"FAKE_URL": fake.URL}, io.Discard)
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for i := range 64 {
		resp, err := c.Get(url + "/readyz")
		if err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("client %d: /readyz answered %d", i, resp.StatusCode)
		}
	}
}
