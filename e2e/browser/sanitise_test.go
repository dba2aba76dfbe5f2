package browser_test

import (
	"strings"
	"testing"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/chromedp"
)

// hostileSVG tries every way a diagram could run script or reach out.
const hostileSVG = `<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" viewBox="0 0 200 60" onload="window.__pwned='onload'">
<script>window.__pwned = 'script'</script>
<style>@import url(http://198.51.100.7/x.css);</style>
<style>text { fill: #333 }</style>
<foreignObject width="10" height="10"><div xmlns="http://www.w3.org/1999/xhtml"><img src="http://198.51.100.7/x.png" onerror="window.__pwned='img'"/></div></foreignObject>
<a href="javascript:window.__pwned='link'"><text x="1" y="10">click me</text></a>
<image href="http://198.51.100.7/x.png" width="5" height="5"/>
<use xlink:href="http://198.51.100.7/x.svg#a"/>
<rect width="10" height="10" fill="url(http://198.51.100.7/p)"/>
<rect x="20" width="10" height="10" fill="url(#grad)"/>
<text x="40" y="30" onclick="window.__pwned='click'">triage</text>
</svg>`

// A diagram is data, never code: whatever SVG the gateway's diagram route
// answered, the page keeps its shapes and text and drops scripts, event
// handlers, foreign content and links that leave the drawing. The answer
// is replaced in the browser, so the check does not depend on what the
// gateway draws.
func TestConsoleDiagramIsSanitised(t *testing.T) {
	gw := startGateway(t, "console.yaml")
	// Parsing the SVG meets its inline handlers, and the page's CSP
	// reports them as refused: expected here, and the proof of the second
	// line of defence. Nothing else may show.
	p := newPage(t, func(problem string) bool {
		return strings.Contains(problem, "violates the following Content Security Policy directive 'script-src 'self''")
	})
	paused := chromedp.Events(p.ctx, fetch.RequestPaused)
	if _, err := chromedp.Call(p.ctx, fetch.Enable, fetch.EnableParams{
		Patterns: []*fetch.RequestPattern{{URLPattern: "*/diagram.svg"}},
	}); err != nil {
		t.Fatal(err)
	}
	go func() {
		for ev, err := range paused {
			if err != nil {
				return
			}
			_, _ = chromedp.Call(p.ctx, fetch.FulfillRequest, fetch.FulfillRequestParams{
				RequestID:       ev.RequestID,
				ResponseCode:    200,
				ResponseHeaders: []*fetch.HeaderEntry{{Name: "Content-Type", Value: "image/svg+xml"}},
				Body:            []byte(hostileSVG),
			})
		}
	}()
	p.do("open the console", chromedp.Navigate(gw.URL+"/console#graphs"))
	p.until("the diagram inlined", `document.querySelector('[data-testid="graph-diagram"] svg text')`)
	p.do("click its text", chromedp.Click(chromedp.CSS(`[data-testid="graph-diagram"] svg text`)))

	svg := eval[string](p, `document.querySelector('[data-testid="graph-diagram"] svg').outerHTML`)
	for _, bad := range []string{"<script", "onload", "onclick", "onerror", "foreignObject", "javascript:", "198.51.100.7", "@import", "<image"} {
		if strings.Contains(svg, bad) {
			t.Errorf("the inlined diagram keeps %q:\n%s", bad, svg)
		}
	}
	for _, good := range []string{"triage", `fill="url(#grad)"`, "fill: #333"} {
		if !strings.Contains(svg, good) {
			t.Errorf("the inlined diagram lost %q:\n%s", good, svg)
		}
	}
	if pwned := eval[string](p, `String(window.__pwned || "")`); pwned != "" {
		t.Errorf("the diagram ran code: %s", pwned)
	}
	p.noProblems()
}
