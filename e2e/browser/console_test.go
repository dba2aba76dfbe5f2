package browser_test

import (
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
)

// JavaScript the waits share. msgs(sel, agent) lists the messages of an
// agent under sel; text(el) is an element's text.
const helpers = `
window.__t = {
  msgs: (sel, agent) => [...document.querySelectorAll(sel + ' [data-testid="message"]')]
    .filter((m) => m.querySelector('[data-testid="agent-label"]').textContent === agent),
  idle: () => !document.querySelector('[data-testid="send"]').disabled,
};`

// chat types text into the message input and presses Enter.
func chat(p *page, text string) {
	p.t.Helper()
	p.do("send "+text, chromedp.SendKeys(tid("message-input"), text), enter)
}

// enter presses Enter as a keyboard does: a page that handles the key
// down (the console sends) gets no character after it. chromedp's "\r"
// would also send a char event, which types a new line after the send.
var enter = chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
	for _, typ := range []input.DispatchKeyEventType{input.DispatchKeyEventTypeRawKeyDown, input.DispatchKeyEventTypeKeyUp} {
		if _, err := cdp.Call(ctx, t, input.DispatchKeyEvent, input.DispatchKeyEventParams{
			Type: typ, Key: "Enter", Code: "Enter", WindowsVirtualKeyCode: 13, NativeVirtualKeyCode: 13,
		}); err != nil {
			return err
		}
	}
	return nil
})

// The console end to end, in a real browser against the real binary on the
// offline desk (console.yaml): the graph drawn, a chat with a handoff, an
// approval decided in the playground and one in the sessions tab, each run
// going on, the session listed; and no console error, failed request or
// error status on the way.
func TestConsole(t *testing.T) {
	gw := startGateway(t, "console.yaml")
	p := newPage(t, nil)
	p.do("open the console", chromedp.Navigate(gw.URL+"/console"))
	eval[bool](p, "(() => {"+helpers+" return true; })()")

	p.until("the support graph drawn", `document.querySelector('[data-testid="graph-diagram"][data-graph="support"] svg')`)
	if n := eval[int](p, `document.querySelectorAll('[data-testid="graph-diagram"] svg').length`); n != 1 {
		t.Errorf("%d diagrams, want 1 (one graph)", n)
	}
	// Section 12: graph-diagram is an inline <svg> per graph.
	if n := eval[int](p, `document.querySelectorAll('svg[data-testid="graph-diagram"]').length`); n != 1 {
		t.Errorf("%d inline <svg> elements with data-testid graph-diagram, want 1", n)
	}
	// The diagram names the graph's agents.
	p.until("the diagram names triage and billing", `(() => { const s = document.querySelector('[data-testid="graph-diagram"] svg').textContent; return s.includes("triage") && s.includes("billing"); })()`)
	p.until("a conversation", `document.querySelector('[data-testid="session-id"]').textContent`)
	session := eval[string](p, `document.querySelector('[data-testid="session-id"]').textContent`)
	if len(session) != 36 {
		t.Fatalf("session id %q is not a UUID", session)
	}

	// Shift+Enter is a new line, not a send.
	p.do("type two lines",
		chromedp.Click(tid("message-input")),
		chromedp.SendKeys(tid("message-input"), "I want a refund"),
		chromedp.KeyEvent("\r", chromedp.KeyModifiers(chromedp.ModifierShift)),
		chromedp.SendKeys(tid("message-input"), "on my invoice"),
	)
	if v := eval[string](p, `document.querySelector('[data-testid="message-input"]').value`); v != "I want a refund\non my invoice" {
		t.Fatalf("after Shift+Enter the input holds %q", v)
	}
	if n := eval[int](p, `document.querySelectorAll('#messages [data-testid="message"]').length`); n != 0 {
		t.Fatalf("Shift+Enter sent a message")
	}
	p.do("press Enter", enter)

	p.until("the user's message labelled you", `__t.msgs('#messages', 'you').some((m) => m.textContent.includes("I want a refund\non my invoice"))`)
	p.until("the handoff triage → billing", `[...document.querySelectorAll('#messages [data-testid="handoff"]')].some((h) => h.textContent.includes("triage → billing"))`)
	p.until("billing's answer", `__t.msgs('#messages', 'billing').some((m) => m.textContent.includes("taking over from triage")) && __t.idle()`)
	if v := eval[string](p, `document.querySelector('[data-testid="message-input"]').value`); v != "" {
		t.Errorf("the input still holds %q after sending", v)
	}

	// billing's refund needs approval: Approve, and the run goes on.
	p.do("ask for the refund",
		chromedp.SendKeys(tid("message-input"), "Please issue the refund"),
		chromedp.Click(tid("send")),
	)
	p.until("an approval", `document.querySelector('#messages [data-testid="approval"] [data-testid="approve"]') && __t.idle()`)
	if s := eval[string](p, `document.querySelector('#messages [data-testid="approval"]').textContent`); !strings.Contains(s, "issue_refund") {
		t.Errorf("the approval does not name the tool: %q", s)
	}
	p.do("approve", chromedp.Click(chromedp.CSS(`#messages [data-testid="approve"]`)))
	p.until("the approval approved", `document.querySelector('#messages [data-testid="approval-status"]').textContent === "approved"`)
	p.until("the refunds sub-agent at work", `document.querySelector('#messages [data-testid="subagent"][data-subagent="refunds"]')`)
	p.until("billing's answer after the refund", `__t.msgs('#messages', 'billing').some((m) => m.textContent.includes("The tool issue_refund returned")) && __t.idle()`)

	// The sessions tab lists the conversation, id in full.
	p.do("open the sessions tab", chromedp.Click(tid("sessions-tab")))
	p.until("the session listed", `[...document.querySelectorAll('[data-testid="session"]')].some((s) => s.textContent.includes(`+js(session)+`))`)
	p.do("open the session", chromedp.Click(chromedp.CSS(`[data-testid="session"][data-session="`+session+`"]`)))
	p.until("its transcript", `document.querySelector('[data-testid="transcript"] [data-testid="handoff"]')`)
	transcript := eval[string](p, `document.querySelector('[data-testid="transcript"]').innerText`)
	for _, want := range []string{"triage → billing", "issue_refund", "I want a refund", "taking over from triage"} {
		if !strings.Contains(transcript, want) {
			t.Errorf("the transcript lacks %q:\n%s", want, transcript)
		}
	}

	// A second conversation, whose approval is rejected from the sessions
	// tab: the run resumes in the playground and billing hears of it.
	p.do("back to the playground", chromedp.Click(tid("playground-tab")), chromedp.Click(tid("new-conversation")))
	second := eval[string](p, `document.querySelector('[data-testid="session-id"]').textContent`)
	if second == session || len(second) != 36 {
		t.Fatalf("new conversation: session %q after %q", second, session)
	}
	if n := eval[int](p, `document.querySelectorAll('#messages [data-testid="message"]').length`); n != 0 {
		t.Errorf("a new conversation shows %d old messages", n)
	}
	chat(p, "I want a refund on my invoice")
	p.until("billing again", `__t.msgs('#messages', 'billing').length === 1 && __t.idle()`)
	chat(p, "Please issue the refund")
	p.until("the second approval", `document.querySelector('#messages [data-testid="approve"]') && __t.idle()`)
	p.do("open the sessions tab", chromedp.Click(tid("sessions-tab")))
	p.until("the second session listed", `document.querySelector('[data-testid="session"][data-session="`+second+`"]')`)
	// Newest write first: this test's two sessions lead the list (on a
	// shared Redis, other runs' sessions of the same principal follow).
	if ids := eval[string](p, `[...document.querySelectorAll('[data-testid="session"]')].slice(0, 2).map((e) => e.dataset.session).join(" ")`); ids != second+" "+session {
		t.Errorf("the list starts with %q, want %q", ids, second+" "+session)
	}
	p.do("open it", chromedp.Click(chromedp.CSS(`[data-testid="session"][data-session="`+second+`"]`)))
	p.until("its pending approval", `document.querySelector('[data-testid="transcript"] [data-testid="reject"]')`)
	p.do("reject", chromedp.Click(chromedp.CSS(`[data-testid="transcript"] [data-testid="reject"]`)))
	p.until("the run resumed in the playground", `!document.getElementById("view-playground").hidden && __t.msgs('#messages', 'billing').some((m) => m.textContent.includes("rejected")) && __t.idle()`)
	if s := eval[string](p, `document.querySelector('[data-testid="session-id"]').textContent`); s != second {
		t.Errorf("the playground continues session %q, want %q", s, second)
	}
	p.noProblems()
}

// With server.api_keys, the page asks for a key, says when one is refused,
// keeps it out of the URL, and works once given the right one.
func TestConsoleKey(t *testing.T) {
	const key = "k-console-browser-1"
	yaml, err := os.ReadFile("console.yaml")
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(t.TempDir(), "keys.yaml")
	// A principal of this run's own, so that on a shared Redis its list
	// holds only this test's session.
	principal := "browser-" + strings.ToLower(rand.Text()[:10])
	withKeys := strings.Replace(string(yaml), "\nserver:\n", "\nserver:\n  api_keys: [{name: "+principal+", key: "+key+"}]\n", 1)
	if withKeys == string(yaml) {
		t.Fatal("console.yaml has no server section to add keys to")
	}
	if err := os.WriteFile(config, []byte(withKeys), 0o600); err != nil {
		t.Fatal(err)
	}
	gw := startGateway(t, config)
	// Without a key, and with the wrong one, /v1/models answers 401: that
	// is how the page learns it needs one.
	p := newPage(t, func(problem string) bool {
		return strings.Contains(problem, "401") &&
			(strings.Contains(problem, "/v1/models") || strings.Contains(problem, "Failed to load resource"))
	})
	p.do("open the console", chromedp.Navigate(gw.URL+"/console"))
	p.until("the key prompt", `!document.getElementById("key-overlay").hidden && document.querySelector('[data-testid="key-input"]')`)
	if n := eval[int](p, `document.querySelectorAll('[data-testid="graph-diagram"]').length`); n != 0 {
		t.Errorf("graphs shown without a key")
	}

	p.do("a wrong key", chromedp.SendKeys(tid("key-input"), "wrong-key\r"))
	p.until("the key refused", `!document.getElementById("key-error").hidden && !document.getElementById("key-overlay").hidden`)

	p.do("the right key", chromedp.SendKeys(tid("key-input"), key+"\r"))
	p.until("the graph drawn", `document.getElementById("key-overlay").hidden && document.querySelector('[data-testid="graph-diagram"] svg')`)
	eval[bool](p, "(() => {"+helpers+" return true; })()")
	chat(p, "I want a refund on my invoice")
	p.until("billing's answer", `__t.msgs('#messages', 'billing').length === 1 && __t.idle()`)
	p.do("open the sessions tab", chromedp.Click(tid("sessions-tab")))
	p.until("the session listed", `document.querySelectorAll('[data-testid="session"]').length === 1`)

	loc, err := chromedp.Run(p.ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(loc, key) {
		t.Errorf("the key is in the URL: %s", loc)
	}
	if strings.Contains(gw.Log(), key) || strings.Contains(gw.Log(), "wrong-key") {
		t.Errorf("the gateway logged a key")
	}
	p.noProblems()
}
