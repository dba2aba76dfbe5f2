package browser_test

import (
	"bufio"
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

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// wait bounds every wait on the page: generous, because CI machines are
// loaded, but the test never sleeps; it waits for the DOM to say so.
const wait = 60 * time.Second

// need returns an environment variable run.sh sets.
func need(t *testing.T, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		t.Fatalf("%s is not set: run the test with e2e/browser/run.sh", name)
	}
	return v
}

// gateway is a switchboard process under test.
type gateway struct {
	URL   string
	logMu *sync.Mutex
	logs  *strings.Builder
}

// Log is what the gateway has logged so far.
func (g *gateway) Log() string {
	g.logMu.Lock()
	defer g.logMu.Unlock()
	return g.logs.String()
}

// startGateway runs the switchboard binary on config, on a port the kernel
// picks (read back from its "switchboard listening" log line), and waits
// for /readyz. The gateway is stopped when the test ends; its log is
// printed when the test failed.
func startGateway(t *testing.T, config string) *gateway {
	t.Helper()
	cmd := exec.Command(need(t, "SWITCHBOARD_BIN"), "serve", "--config", config, "--listen", "127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the gateway: %v", err)
	}
	g := &gateway{logMu: &sync.Mutex{}, logs: &strings.Builder{}}
	logMu, logs := g.logMu, g.logs
	addr := make(chan string, 1)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			logMu.Lock()
			logs.WriteString(line + "\n")
			logMu.Unlock()
			var rec struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "switchboard listening" {
				select {
				case addr <- rec.Addr:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		<-scanned
		if t.Failed() {
			logMu.Lock()
			t.Logf("gateway log (%s):\n%s", filepath.Base(config), logs.String())
			logMu.Unlock()
		}
	})
	var url string
	select {
	case a := <-addr:
		url = "http://" + a
	case <-scanned:
		t.Fatalf("the gateway on %s exited before listening", config)
	case <-time.After(wait):
		t.Fatalf("the gateway on %s did not listen within %s", config, wait)
	}
	deadline := time.Now().Add(wait)
	for {
		resp, err := http.Get(url + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				g.URL = url
				return g
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway on %s is not ready: %v", url, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// page is one headless Chromium tab that records every problem the
// console would show: console errors, uncaught exceptions, responses of
// 400 and above, and requests that failed.
type page struct {
	t        *testing.T
	ctx      context.Context
	mu       sync.Mutex
	problems []string
	// allowed tells which problems a test expects (the key prompt's 401).
	allowed func(problem string) bool
}

// newPage starts Chromium (a fresh profile, no background traffic) and
// opens a tab. Chromium is stopped when the test ends.
func newPage(t *testing.T, allowed func(string) bool) *page {
	t.Helper()
	// Chromium keeps its shared memory in files under TMPDIR
	// (disable-dev-shm-usage), in directories of its own that it leaves
	// behind when it is stopped: six a run of the suite. So it gets a
	// TMPDIR of its own, removed once it has exited (not t.TempDir, whose
	// removal fails the test if a child process still writes there).
	tmp, err := os.MkdirTemp("", "switchboard-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(need(t, "CHROMIUM_BIN")),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Env("TMPDIR=" + tmp),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.WindowSize(1360, 860),
		// Without these, Chromium keeps calling home on a closed network.
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-domain-reliability", true),
		chromedp.Flag("disable-breakpad", true),
		chromedp.Flag("disable-client-side-phishing-detection", true),
		chromedp.Flag("disable-features", "Translate,OptimizationHints,MediaRouter,AutofillServerCommunication"),
		chromedp.Flag("no-pings", true),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("mute-audio", true),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	p := &page{t: t, ctx: ctx, allowed: allowed}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		cancelAlloc() // waits for the browser process to exit
		wg.Wait()
		_ = os.RemoveAll(tmp)
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	// Subscribed before any navigation, read as they come.
	console := chromedp.Console(ctx)
	responses := chromedp.Events(ctx, network.ResponseReceived)
	failures := chromedp.Events(ctx, network.LoadingFailed)
	wg.Add(3)
	go func() {
		defer wg.Done()
		for m, err := range console {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				p.problem(fmt.Sprintf("console %s (%s:%d)", m, m.URL, m.Line+1))
			}
		}
	}()
	go func() {
		defer wg.Done()
		for ev, err := range responses {
			if err != nil {
				return
			}
			if ev.Response.Status >= 400 {
				p.problem(fmt.Sprintf("HTTP %d %s", ev.Response.Status, ev.Response.URL))
			}
		}
	}()
	go func() {
		defer wg.Done()
		for ev, err := range failures {
			if err != nil {
				return
			}
			// A stream the page aborts on purpose (a new conversation) is
			// canceled, not failed.
			if !ev.Canceled {
				p.problem(fmt.Sprintf("request %s (%s) failed: %s %s", ev.RequestID, ev.Type, ev.ErrorText, ev.BlockedReason))
			}
		}
	}()
	return p
}

func (p *page) problem(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.allowed != nil && p.allowed(s) {
		return
	}
	p.problems = append(p.problems, s)
}

// noProblems fails the test with every problem seen so far.
func (p *page) noProblems() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.problems) > 0 {
		p.t.Errorf("the page had problems:\n  %s", strings.Join(p.problems, "\n  "))
	}
}

// do runs actions, failing the test on error.
func (p *page) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, wait)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		p.t.Fatalf("%s: %v%s", what, err, p.dump())
	}
}

// until waits until the JavaScript expression is truthy; while it
// throws (an element not there yet) it counts as false.
func (p *page) until(what, expr string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, wait+5*time.Second)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[any]("(() => { try { return !!("+expr+"); } catch (e) { return false; } })()",
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(wait)))
	if err != nil {
		p.t.Fatalf("waiting for %s: %v%s", what, err, p.dump())
	}
}

// eval evaluates a JavaScript expression.
func eval[T any](p *page, expr string) T {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, wait)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		p.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// dump is the page's visible text and the problems so far, for a failure.
func (p *page) dump() string {
	ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
	defer cancel()
	text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	if err != nil {
		text = "(cannot read the page: " + err.Error() + ")"
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return fmt.Sprintf("\n--- page text ---\n%s\n--- problems ---\n%s", text, strings.Join(p.problems, "\n"))
}

// js quotes s as a JavaScript string.
func js(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// tid is the CSS selector of a data-testid.
func tid(id string) chromedp.CSS { return chromedp.CSS(`[data-testid="` + id + `"]`) }
