package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
	"github.com/switchboard-ai/switchboard/internal/gwtest"
)

// The gateway's calls to configured URLs (a judge, a hook, an HTTP tool)
// do not follow redirects: a 3xx is a non-2xx answer, and the payload
// never reaches the address it names, which is not in the config.

// elsewhere is an address not in the config: it records what reaches it
// and answers as a judge, a hook and a tool would to let anything through.
type elsewhere struct {
	*httptest.Server
	mu   sync.Mutex
	hits []string
}

// newRedirect returns a configured endpoint that answers every request
// 307 to the same path on an elsewhere, and that elsewhere.
func newRedirect(t *testing.T) (*httptest.Server, *elsewhere) {
	e := &elsewhere{}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		e.mu.Lock()
		e.hits = append(e.hits, r.Method+" "+r.URL.Path)
		e.mu.Unlock()
		switch r.URL.Path {
		case "/check":
			_, _ = io.WriteString(w, `{"tripwire": false}`)
		case "/gate":
			_, _ = io.WriteString(w, `{"action": "allow"}`)
		case "/charges":
			_, _ = io.WriteString(w, `{"charges": []}`)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	t.Cleanup(e.Close)
	r := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		http.Redirect(w, r, e.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(r.Close)
	return r, e
}

// assertUntouched fails t if anything reached e.
func (e *elsewhere) assertUntouched(t *testing.T) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.hits) != 0 {
		t.Errorf("the redirect was followed: %v reached an address not in the config", e.hits)
	}
}

// A judge that answers 307 could not check the text: the guardrail trips
// (CONTRACT §7), though the redirect's target would pass it.
func TestJudgeRedirectTrips(t *testing.T) {
	redirect, target := newRedirect(t)
	fake := fakeupstream.New(t, fakeupstream.Reply{Text: "hello"})
	gw, _ := guardDesk(t, guardLists{graphIn: "policy"}, fake, &judgeServer{Server: redirect})
	r := guardChat(t, gw, gwtest.User("support", "my card is 4111"), nil)
	assertTripped(t, r, "I can't help with that request.", "policy", "input", "the guardrail could not check the text")
	target.assertUntouched(t)
}

// A pre_tool_call hook that answers 307 failed: the call is denied (fail
// closed), though the redirect's target would allow it.
func TestPreToolCallRedirectDenies(t *testing.T) {
	redirect, target := newRedirect(t)
	gw, fake, _ := hookedDesk(t, "memory://", &hookServer{Server: redirect}, "",
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "transfer_to_billing", `{}`)}},
		fakeupstream.Reply{Text: "Triage it is."},
	)
	c := completion(t, gw, gwtest.User("support", "bill?"), map[string]string{"Authorization": "Bearer key-acme"})
	if c.Text() != "Triage it is." || c.Metadata.AgentName != "triage" {
		t.Fatalf("%q by %q: the handoff happened", c.Text(), c.Metadata.AgentName)
	}
	var res struct {
		Error struct{ Code, Message string }
	}
	raw := toolResults(fake.Requests()[1])["c1"]
	want := "the pre_tool_call hook failed: status 307: redirects are not followed"
	if err := json.Unmarshal([]byte(raw), &res); err != nil || res.Error.Code != "denied" || res.Error.Message != want {
		t.Errorf("result %s, want denied: %s", raw, want)
	}
	target.assertUntouched(t)
}

// An HTTP tool that answers 307 failed: the model reads tool_failed, and
// the call's arguments go nowhere else.
func TestHTTPToolRedirectFails(t *testing.T) {
	redirect, target := newRedirect(t)
	fake := fakeupstream.New(t,
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "transfer_to_billing", `{}`)}},
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c2", "lookup_charges", `{}`)}},
		fakeupstream.Reply{Text: "the tool is down"},
	)
	gw := gwtest.Start(t, deskYAML, map[string]string{"FAKE_URL": fake.URL, "TOOLS_URL": redirect.URL})
	if c := completion(t, gw, gwtest.User("support", "bill"), nil); c.Text() != "the tool is down" {
		t.Fatalf("text %q", c.Text())
	}
	res := toolResults(fake.Requests()[2])["c2"]
	if errorCode(t, res) != "tool_failed" || !strings.Contains(res, "status 307") {
		t.Errorf("result %s, want tool_failed saying status 307", res)
	}
	if strings.Contains(res, target.URL) || strings.Contains(res, redirect.URL) {
		t.Errorf("an address reached the model: %s", res)
	}
	target.assertUntouched(t)
}

// An on_handoff hook that answers 307 failed, which is not fatal: the
// handoff goes on, and the hook's payload goes nowhere else.
func TestOnHandoffRedirectIsNotFollowed(t *testing.T) {
	redirect, target := newRedirect(t)
	fake := fakeupstream.New(t,
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "transfer_to_premium", `{}`)}},
		fakeupstream.Reply{Text: "premium desk"},
	)
	gw := gwtest.Start(t, deskYAML, map[string]string{"FAKE_URL": fake.URL, "TOOLS_URL": redirect.URL})
	body := gwtest.User("support", "hello")
	body["metadata"] = map[string]any{"plan": "pro"}
	if c := completion(t, gw, body, nil); c.Metadata.AgentName != "premium" || c.Text() != "premium desk" {
		t.Fatalf("agent %q text %q", c.Metadata.AgentName, c.Text())
	}
	target.assertUntouched(t)
}
