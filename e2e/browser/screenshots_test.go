package browser_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestScreenshots writes the README's pictures of the console into
// $CONSOLE_SCREENSHOTS (run.sh screenshots sets it to docs/img): the
// playground after a handoff and an approved refund, the graphs, and a
// session's transcript. Without the variable it is skipped.
func TestScreenshots(t *testing.T) {
	dir := os.Getenv("CONSOLE_SCREENSHOTS")
	if dir == "" {
		t.Skip("CONSOLE_SCREENSHOTS is not set (run.sh screenshots)")
	}
	gw := startGateway(t, "console.yaml")
	p := newPage(t, nil)
	p.do("open the console", chromedp.EmulateViewport(1360, 860), chromedp.Navigate(gw.URL+"/console#playground"))
	eval[bool](p, "(() => {"+helpers+" return true; })()")
	p.until("the diagram", `document.querySelector('#side-diagram svg')`)

	chat(p, "I want a refund on my invoice")
	p.until("billing's answer", `__t.msgs('#messages', 'billing').length === 1 && __t.idle()`)
	chat(p, "Please issue the refund")
	p.until("the approval", `document.querySelector('#messages [data-testid="approve"]') && __t.idle()`)
	shoot(p, filepath.Join(dir, "console-approval.png"))
	p.do("approve", chromedp.Click(chromedp.CSS(`#messages [data-testid="approve"]`)))
	p.until("billing after the refund", `__t.msgs('#messages', 'billing').length === 2 && __t.idle()`)
	p.do("open the sub-agent's work", chromedp.Click(chromedp.CSS(`#messages [data-testid="subagent"] summary`)))
	eval[bool](p, `(() => { const m = document.getElementById("messages"); m.scrollTop = m.scrollHeight; return true; })()`)
	shoot(p, filepath.Join(dir, "console-playground.png"))

	p.do("graphs", chromedp.Click(tid("graphs-tab")))
	p.until("the graph drawn", `document.querySelector('[data-testid="graph-diagram"] svg')`)
	shoot(p, filepath.Join(dir, "console-graphs.png"))

	p.do("sessions", chromedp.Click(tid("sessions-tab")))
	p.until("the session", `document.querySelector('[data-testid="session"]')`)
	p.do("open it", chromedp.Click(chromedp.CSS(`[data-testid="session"]`)))
	p.until("its transcript", `document.querySelector('[data-testid="transcript"] [data-testid="tool-call"]')`)
	shoot(p, filepath.Join(dir, "console-sessions.png"))
	p.noProblems()
}

// shoot saves the viewport as a PNG.
func shoot(p *page, path string) {
	p.t.Helper()
	png, err := chromedp.Run(p.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		p.t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.t.Fatal(err)
	}
	p.t.Logf("wrote %s (%d bytes)", path, len(png))
}
