// Package ops_test checks what CONTRACT §13 promises operators, through the
// built binary and its real HTTP API, in front of the scripted fake
// upstream: config reloads (SIGHUP and serve --watch) and per-key rate
// limits shared by two gateways on one Redis.
package ops_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-ai/switchboard/internal/openapicheck"
	"github.com/switchboard-ai/switchboard/internal/testenv"
)

var binary struct {
	path string
	err  error
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "switchboard-ops-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "ops: temp dir:", err)
		os.Exit(1)
	}
	binary.path, binary.err = build(dir)
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// build builds ./cmd/switchboard into dir.
func build(dir string) (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	bin := filepath.Join(dir, "switchboard")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/switchboard")
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(out)))
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, b)
	}
	return bin, nil
}

// proc is `switchboard serve` running as a child process.
type proc struct {
	t      *testing.T
	URL    string
	Config string // the config file's path, for rewriting
	cmd    *exec.Cmd
	done   chan struct{}

	mu  sync.Mutex
	log bytes.Buffer
}

// start writes yaml to a file and serves it with the built binary (extra
// flags after the config) on a port the kernel picks, read back from its
// log (testenv.ListeningAddr), waiting until /healthz answers.
func start(t *testing.T, yaml string, flags ...string) *proc {
	t.Helper()
	if binary.err != nil {
		t.Fatalf("gateway binary: %v", binary.err)
	}
	p := &proc{t: t, Config: filepath.Join(t.TempDir(), "switchboard.yaml"), done: make(chan struct{})}
	p.write(yaml)
	p.cmd = exec.Command(binary.path, append([]string{"serve", "--config", p.Config, "--listen", "127.0.0.1:0"}, flags...)...)
	p.cmd.Env = env()
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	w := &lockedWriter{p: p}
	p.cmd.Stdout, p.cmd.Stderr = w, w
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start gateway: %v", err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("gateway %s log:\n%s", p.URL, p.output())
		}
	})
	eventually(t, 15*time.Second, "the gateway answers /healthz", func() bool {
		select {
		case <-p.done:
			t.Fatalf("gateway exited at start:\n%s", p.output())
		default:
		}
		if p.URL == "" {
			addr, ok := testenv.ListeningAddr(p.output())
			if !ok {
				return false
			}
			p.URL = "http://" + addr
		}
		r, err := http.Get(p.URL + "/healthz")
		if err != nil {
			return false
		}
		r.Body.Close()
		return r.StatusCode == http.StatusOK
	})
	return p
}

// write replaces the config file's content, as an editor's rename-on-save
// does.
func (p *proc) write(yaml string) {
	p.t.Helper()
	tmp := p.Config + ".tmp"
	if err := os.WriteFile(tmp, []byte(yaml), 0o600); err != nil {
		p.t.Fatal(err)
	}
	if err := os.Rename(tmp, p.Config); err != nil {
		p.t.Fatal(err)
	}
}

func (p *proc) hup() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		p.t.Fatalf("SIGHUP: %v", err)
	}
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// waitLog waits until the gateway's log holds each of texts. A line the
// gateway wrote before an answer the test saw may not have come through
// the pipe of its standard error yet: reading the log at once raced it.
func (p *proc) waitLog(t *testing.T, texts ...string) {
	t.Helper()
	for _, text := range texts {
		eventually(t, 10*time.Second, "the log holds "+text, func() bool {
			return strings.Contains(p.output(), text)
		})
	}
}

type lockedWriter struct{ p *proc }

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	return w.p.log.Write(b)
}

// env is this process's environment without the overrides that would make
// the gateway ignore its config file.
func env() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "SWITCHBOARD_LISTEN", "SWITCHBOARD_STORE_URL", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_SERVICE_NAME":
			continue
		}
		out = append(out, kv)
	}
	return out
}

// eventually polls cond until it holds or d has passed.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting until %s", d, what)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// reply is one answer of the gateway.
type reply struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r reply) String() string { return fmt.Sprintf("%d %s", r.Status, bytes.TrimSpace(r.Body)) }

// code is the error code of an OpenAI error body.
func (r reply) code() string {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(r.Body, &e)
	return e.Error.Code
}

// do sends a request with an optional bearer key and JSON body.
func do(ctx context.Context, t *testing.T, method, url, key string, body any) reply {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("%s %s: %v", method, url, err)
		return reply{}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Errorf("%s %s: read: %v", method, url, err)
	} else if c := openapicheck.ForTest(t); c != nil {
		if _, err := c.CheckReply(method, req.URL.Path, resp.StatusCode, resp.Header.Get("Content-Type"), b); err != nil {
			t.Errorf("%s %s: the published OpenAI schema refuses the answer: %v", method, url, err)
		}
	}
	return reply{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// chat sends one user message to model.
func chat(ctx context.Context, t *testing.T, base, key, model, text string) reply {
	t.Helper()
	return do(ctx, t, http.MethodPost, base+"/v1/chat/completions", key, map[string]any{
		"model":    model,
		"messages": []map[string]string{{"role": "user", "content": text}},
	})
}

// models lists the ids /v1/models answers.
func models(t *testing.T, base, key string) []string {
	t.Helper()
	r := do(context.Background(), t, http.MethodGet, base+"/v1/models", key, nil)
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(r.Body, &list); err != nil || r.Status != http.StatusOK {
		t.Fatalf("GET /v1/models: %v (%v)", r, err)
	}
	ids := make([]string, len(list.Data))
	for i, m := range list.Data {
		ids[i] = m.ID
	}
	return ids
}

// metric reads one sample of the gateway's /metrics, "" when absent.
func metric(t *testing.T, base, series string) string {
	t.Helper()
	r := do(context.Background(), t, http.MethodGet, base+"/metrics", "", nil)
	for line := range strings.SplitSeq(string(r.Body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	return ""
}

// needRedis skips without the shared Redis (fails with CI=true).
func needRedis(t *testing.T) { testenv.NeedRedis(t) }
