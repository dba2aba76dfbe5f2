package gateway_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard-ai/switchboard/internal/gwtest"
)

const consoleYAML = `
server:
  session_header: X-Conversation
  api_keys: [{name: acme, key: k-console-1}]
agents:
  triage:
    description: Routes the user
    instructions: You are the triage desk.
    model: demo/switchboard-demo
graphs:
  support: {lead: triage}
`

// The console is served without a key even when keys are configured (it
// is static and holds no data), forbids remote sources, and tells its
// script the gateway's session header; the API behind it still needs a key.
func TestConsolePage(t *testing.T) {
	gw := gwtest.Start(t, consoleYAML, nil)
	ctx := context.Background()

	page := gw.Do(ctx, http.MethodGet, "/console", nil, nil)
	if page.Status != http.StatusOK || !strings.HasPrefix(page.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /console: %d %s", page.Status, page.Header.Get("Content-Type"))
	}
	csp := page.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy %q lacks %q", csp, want)
		}
	}
	body := string(page.Body)
	if !strings.Contains(body, `<meta name="switchboard-session-header" content="X-Conversation">`) {
		t.Errorf("the page does not name the configured session header")
	}
	for _, id := range []string{"message-input", "send", "sessions-tab"} {
		if !strings.Contains(body, `data-testid="`+id+`"`) {
			t.Errorf("the page has no data-testid=%q", id)
		}
	}
	// Nothing remote: every src and href is the gateway's or a data: URI.
	for _, attr := range []string{`src="`, `href="`} {
		for _, part := range strings.Split(body, attr)[1:] {
			if strings.HasPrefix(part, "http") || strings.HasPrefix(part, "//") {
				t.Errorf("the page loads a remote resource: %s%.60s", attr, part)
			}
		}
	}

	for file, ctype := range map[string]string{"console.js": "text/javascript", "console.css": "text/css"} {
		r := gw.Do(ctx, http.MethodGet, "/console/"+file, nil, nil)
		if r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), ctype) || len(r.Body) == 0 {
			t.Errorf("GET /console/%s: %d %q, %d bytes", file, r.Status, r.Header.Get("Content-Type"), len(r.Body))
		}
		if r.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET /console/%s without nosniff", file)
		}
	}
	if r := gw.Do(ctx, http.MethodGet, "/console/index.html", nil, nil); r.Status != http.StatusNotFound || r.ErrorCode(t) != "not_found" {
		t.Errorf("GET /console/index.html: %d %s", r.Status, r.Body)
	}
	if r := gw.Do(ctx, http.MethodGet, "/console/../go.mod", nil, nil); r.Status == http.StatusOK {
		t.Errorf("GET /console/../go.mod: %d", r.Status)
	}

	if r := gw.Do(ctx, http.MethodGet, "/v1/models", nil, nil); r.Status != http.StatusUnauthorized {
		t.Errorf("GET /v1/models without a key: %d", r.Status)
	}
	if r := gw.Do(ctx, http.MethodGet, "/v1/models", nil, map[string]string{"Authorization": "Bearer k-console-1"}); r.Status != http.StatusOK {
		t.Errorf("GET /v1/models with the key: %d %s", r.Status, r.Body)
	}
}

// The console's page answers with a slash too, as a person may type it.
func TestConsoleWithASlash(t *testing.T) {
	gw, _, _ := desk(t)
	r := gw.Do(context.Background(), http.MethodGet, "/console/", nil, nil) // the client follows the redirect
	if r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") {
		t.Errorf("GET /console/: %d %q", r.Status, r.Header.Get("Content-Type"))
	}
}
