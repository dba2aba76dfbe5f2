package gateway_test

import (
	"context"
	"crypto/rand"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
	"github.com/switchboard-ai/switchboard/internal/gwtest"
)

// listYAML is a two-desk graph behind two API keys whose names (the
// principals) are new on every run, so that a shared Redis lists nothing
// of earlier runs.
const listYAML = `
server:
  api_keys:
    - {name: "acme-${RUN}", key: key-acme}
    - {name: "globex-${RUN}", key: key-globex}
providers:
  fake: {base_url: "${FAKE_URL}", timeout: 5s}
agents:
  triage:
    description: Routes the user
    instructions: You are the triage desk.
    model: fake/triage-model
    handoffs: [billing]
  billing:
    description: Answers questions about charges
    instructions: You are the billing desk.
    model: fake/billing-model
graphs:
  support: {lead: triage}
`

// listDesk starts the list desk on a store, with extra store settings.
func listDesk(t *testing.T, storeURL, storeExtra string) (*gwtest.Gateway, *fakeupstream.Server) {
	t.Helper()
	fake := fakeupstream.New(t)
	gw := gwtest.Start(t, listYAML+"store: {url: \""+storeURL+"\""+storeExtra+"}\n",
		map[string]string{"FAKE_URL": fake.URL, "RUN": rand.Text()})
	return gw, fake
}

var (
	acmeKey   = bearer("key-acme")
	globexKey = bearer("key-globex")
)

// with adds a session header to a key's header.
func with(auth map[string]string, sessionID string) map[string]string {
	return map[string]string{"Authorization": auth["Authorization"], "X-Session-Id": sessionID}
}

// listEntry is one item of GET /v1/sessions.
type listEntry struct {
	ID          string `json:"id"`
	ActiveAgent string `json:"activeAgent"`
	Version     int64  `json:"version"`
	UpdatedAt   int64  `json:"updatedAt"`
}

// listSessions gets /v1/sessions with query and checks the list's shape:
// object "list", data an array (never null), times in [since, now] in unix
// seconds, never newer down the list.
func listSessions(t *testing.T, gw *gwtest.Gateway, query string, auth map[string]string, since time.Time) []listEntry {
	t.Helper()
	r := gw.Do(context.Background(), http.MethodGet, "/v1/sessions"+query, nil, auth)
	if r.Status != http.StatusOK {
		t.Fatalf("GET /v1/sessions%s: %d %s", query, r.Status, r.Body)
	}
	var body struct {
		Object string       `json:"object"`
		Data   *[]listEntry `json:"data"`
	}
	r.Decode(t, &body)
	if body.Object != "list" || body.Data == nil {
		t.Fatalf("GET /v1/sessions%s = %s, want an object list with data", query, r.Body)
	}
	now := time.Now().Unix()
	for i, e := range *body.Data {
		if e.UpdatedAt < since.Unix() || e.UpdatedAt > now {
			t.Errorf("%s updatedAt %d, want unix seconds within [%d, %d]", e.ID, e.UpdatedAt, since.Unix(), now)
		}
		if i > 0 && e.UpdatedAt > (*body.Data)[i-1].UpdatedAt {
			t.Errorf("%s (updated %d) listed after an older session", e.ID, e.UpdatedAt)
		}
	}
	return *body.Data
}

// ids returns "id@activeAgent" for each session of a list.
func ids(l []listEntry) []string {
	out := make([]string, len(l))
	for i, e := range l {
		out[i] = e.ID + "@" + e.ActiveAgent
	}
	return out
}

// sameAsGet checks that each listed session's agent and version are those
// GET /v1/sessions/{id} shows.
func sameAsGet(t *testing.T, gw *gwtest.Gateway, l []listEntry, auth map[string]string) {
	t.Helper()
	for _, e := range l {
		r, s := getSession(t, gw, e.ID, auth)
		if r.Status != http.StatusOK || s.Version != e.Version || s.ActiveAgent != e.ActiveAgent || e.Version < 1 {
			t.Errorf("listed %+v, but GET says %d %s@%s version %d", e, r.Status, s.ID, s.ActiveAgent, s.Version)
		}
	}
}

// GET /v1/sessions lists the caller's sessions, the most recently written
// first, limited, isolated per API key, with sessions forked by the
// Responses API, and without deleted ones.
func TestListSessions(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		gw, fake := listDesk(t, storeURL, "")
		start := time.Now()
		chat := func(auth map[string]string, id, text string, replies ...fakeupstream.Reply) {
			t.Helper()
			fake.Push(replies...)
			completion(t, gw, gwtest.User("support", text), with(auth, id))
		}
		if got := listSessions(t, gw, "", acmeKey, start); len(got) != 0 {
			t.Fatalf("a new principal lists %v", got)
		}

		chat(acmeKey, "s1", "hello", fakeupstream.Reply{Text: "Hi."})
		chat(acmeKey, "s2", "hello", fakeupstream.Reply{Text: "Hi."})
		chat(acmeKey, "s3", "my bill",
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "transfer_to_billing", `{}`)}},
			fakeupstream.Reply{Text: "Billing here."})
		want := []string{"s3@billing", "s2@triage", "s1@triage"}
		l := listSessions(t, gw, "", acmeKey, start)
		if got := ids(l); !cmp.Equal(got, want) {
			t.Fatalf("list = %v, want %v", got, want)
		}
		sameAsGet(t, gw, l, acmeKey)
		v1 := l[2].Version

		// A new turn moves s1 to the front.
		chat(acmeKey, "s1", "again", fakeupstream.Reply{Text: "Hello again."})
		want = []string{"s1@triage", "s3@billing", "s2@triage"}
		l = listSessions(t, gw, "", acmeKey, start)
		if got := ids(l); !cmp.Equal(got, want) {
			t.Fatalf("after a turn of s1, list = %v, want %v", got, want)
		}
		if l[0].Version <= v1 {
			t.Errorf("s1's version went from %d to %d with a turn", v1, l[0].Version)
		}
		sameAsGet(t, gw, l, acmeKey)
		if got := ids(listSessions(t, gw, "?limit=2", acmeKey, start)); !cmp.Equal(got, want[:2]) {
			t.Errorf("limit=2 lists %v, want %v", got, want[:2])
		}
		if got := ids(listSessions(t, gw, "?limit=100", acmeKey, start)); !cmp.Equal(got, want) {
			t.Errorf("limit=100 lists %v, want %v", got, want)
		}

		// Another key is another principal: none of acmeKey's sessions, even
		// under the same id, and acmeKey does not see its own.
		if got := listSessions(t, gw, "", globexKey, start); len(got) != 0 {
			t.Fatalf("globexKey lists acmeKey's sessions: %v", got)
		}
		chat(globexKey, "s2", "hello", fakeupstream.Reply{Text: "Hi globexKey."})
		if got := ids(listSessions(t, gw, "", globexKey, start)); !cmp.Equal(got, []string{"s2@triage"}) {
			t.Errorf("globexKey lists %v, want its own s2", got)
		}
		if got := ids(listSessions(t, gw, "", acmeKey, start)); !cmp.Equal(got, want) {
			t.Errorf("after globexKey's turn, acmeKey lists %v, want %v", got, want)
		}

		// Sessions the Responses API starts and forks are listed too.
		fake.Push(fakeupstream.Reply{Text: "One."}, fakeupstream.Reply{Text: "Two."}, fakeupstream.Reply{Text: "Forked."})
		r1 := create(t, gw, input("first"), acmeKey)
		create(t, gw, input("second", "previous_response_id", r1.ID), acmeKey)
		r3 := create(t, gw, input("fork", "previous_response_id", r1.ID), acmeKey)
		orig, forked := r1.Metadata["sessionId"], r3.Metadata["sessionId"]
		if orig == "" || forked == "" || orig == forked {
			t.Fatalf("no fork: sessions %q and %q", orig, forked)
		}
		got := listSessions(t, gw, "?limit=3", acmeKey, start)
		if len(got) != 3 || got[0].ID != forked || got[1].ID != orig || got[2].ID != "s1" {
			t.Errorf("after a fork, list = %v, want the fork, its origin, then s1", ids(got))
		}

		// A deleted session is not listed.
		if r := gw.Do(context.Background(), http.MethodDelete, "/v1/sessions/s3", nil, acmeKey); r.Status != http.StatusNoContent {
			t.Fatalf("DELETE: %d %s", r.Status, r.Body)
		}
		for _, e := range listSessions(t, gw, "", acmeKey, start) {
			if e.ID == "s3" {
				t.Errorf("deleted session s3 is listed")
			}
		}
	})
}

// A limit that is not an integer from 1 to 100 is a 400 naming limit, as
// OpenAI's list endpoints answer it; a missing key is 401.
func TestListSessionsBadRequests(t *testing.T) {
	gw, _ := listDesk(t, "memory://", "")
	for _, q := range []string{"?limit=0", "?limit=-1", "?limit=101", "?limit=1000000", "?limit=abc", "?limit=", "?limit=1.5", "?limit=2e1"} {
		r := gw.Do(context.Background(), http.MethodGet, "/v1/sessions"+q, nil, acmeKey)
		var e struct {
			Error struct {
				Code, Type, Message string
				Param               *string
			} `json:"error"`
		}
		r.Decode(t, &e)
		if r.Status != http.StatusBadRequest || e.Error.Code != "invalid_request" || e.Error.Type != "invalid_request_error" ||
			e.Error.Param == nil || *e.Error.Param != "limit" || !strings.Contains(e.Error.Message, "limit") {
			t.Errorf("GET /v1/sessions%s = %d %s, want 400 invalid_request with param limit", q, r.Status, r.Body)
		}
	}
	if r := gw.Do(context.Background(), http.MethodGet, "/v1/sessions", nil, nil); r.Status != http.StatusUnauthorized {
		t.Errorf("without a key: %d %s, want 401", r.Status, r.Body)
	}
	if r := gw.Do(context.Background(), http.MethodPost, "/v1/sessions", nil, acmeKey); r.Status != http.StatusMethodNotAllowed {
		t.Errorf("POST /v1/sessions: %d %s, want 405", r.Status, r.Body)
	}
}

// A session past session_ttl is not listed.
func TestListSessionsExpired(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		gw, fake := listDesk(t, storeURL, ", session_ttl: 1s")
		start := time.Now()
		fake.Push(fakeupstream.Reply{Text: "Hi."})
		completion(t, gw, gwtest.User("support", "hello"), with(acmeKey, "short"))
		if got := ids(listSessions(t, gw, "", acmeKey, start)); !cmp.Equal(got, []string{"short@triage"}) {
			t.Fatalf("list = %v, want the new session", got)
		}
		time.Sleep(1500 * time.Millisecond)
		if got := listSessions(t, gw, "", acmeKey, start); len(got) != 0 {
			t.Errorf("an expired session is listed: %v", got)
		}
	})
}
