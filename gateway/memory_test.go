package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
	"github.com/switchboard-ai/switchboard/internal/gwtest"
)

// memoryYAML is a desk whose agents share a customer profile (scoped by
// principal and metadata.customer_id) and session notes (the default scope).
const memoryYAML = `
server:
  api_keys:
    - {name: acme, key: key-acme}
    - {name: globex, key: key-globex}
providers:
  fake: {base_url: "${FAKE_URL}", timeout: 5s}
memory:
  customer_profile:
    description: Facts about the customer that every desk should know
    scope: [principal, metadata.customer_id]
    max_bytes: 40
  notes: {description: Notes of this conversation}
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
  support: {lead: triage, memory: [customer_profile, notes]}
  plain: {lead: billing}
`

// memoryDesk starts the memory desk on a store.
func memoryDesk(t *testing.T, storeURL string, replies ...fakeupstream.Reply) (*gwtest.Gateway, *fakeupstream.Server) {
	t.Helper()
	fake := fakeupstream.New(t, replies...)
	fake.SetStrict(true)
	gw := gwtest.Start(t, memoryYAML+"store: {url: \""+storeURL+"\"}\n", map[string]string{"FAKE_URL": fake.URL})
	return gw, fake
}

func bearer(key string) map[string]string { return map[string]string{"Authorization": "Bearer " + key} }

// memoryBody is the body of GET /v1/memory/{slot}.
type memoryBody struct {
	Slot  string   `json:"slot"`
	Facts []string `json:"facts"`
}

// getMemory reads a slot through the API; query holds its scope values.
func getMemory(t *testing.T, gw *gwtest.Gateway, key, slot string, query url.Values) []string {
	t.Helper()
	resp := gw.Do(context.Background(), http.MethodGet, "/v1/memory/"+slot+"?"+query.Encode(), nil, bearer(key))
	if resp.Status != http.StatusOK {
		t.Fatalf("GET memory %s: status %d: %s", slot, resp.Status, resp.Body)
	}
	var m memoryBody
	resp.Decode(t, &m)
	if m.Slot != slot || m.Facts == nil {
		t.Fatalf("GET memory %s: %s", slot, resp.Body)
	}
	return m.Facts
}

func TestMemoryAPIErrors(t *testing.T) {
	gw, _ := memoryDesk(t, "memory://")
	tests := []struct {
		name, method, path string
		status             int
		code, param        string
	}{
		{"unknown slot", http.MethodGet, "/v1/memory/nope?session=s1", http.StatusNotFound, "memory_slot_not_found", "slot"},
		{"unknown slot delete", http.MethodDelete, "/v1/memory/nope", http.StatusNotFound, "memory_slot_not_found", "slot"},
		{"missing metadata scope", http.MethodGet, "/v1/memory/customer_profile?customer_id=c1", http.StatusBadRequest, "invalid_request", "metadata.customer_id"},
		{"missing session scope", http.MethodDelete, "/v1/memory/notes", http.StatusBadRequest, "invalid_request", "session"},
		{"empty scope value", http.MethodGet, "/v1/memory/notes?session=", http.StatusBadRequest, "invalid_request", "session"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := gw.Do(context.Background(), tt.method, tt.path, nil, bearer("key-acme"))
			if resp.Status != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.Status, tt.status, resp.Body)
			}
			var e struct {
				Error struct{ Message, Type, Param, Code string }
			}
			resp.Decode(t, &e)
			if e.Error.Code != tt.code || e.Error.Param != tt.param || e.Error.Message == "" {
				t.Errorf("error %+v, want code %s param %s", e.Error, tt.code, tt.param)
			}
		})
	}
	// Without a key, nothing is told.
	if resp := gw.Do(context.Background(), http.MethodGet, "/v1/memory/notes?session=s1", nil, nil); resp.Status != http.StatusUnauthorized {
		t.Errorf("without a key: status %d", resp.Status)
	}
	// A slot nothing was remembered in reads empty, and deletes.
	if got := getMemory(t, gw, "key-acme", "notes", url.Values{"session": {"s1"}}); len(got) != 0 {
		t.Errorf("empty slot: %q", got)
	}
	if resp := gw.Do(context.Background(), http.MethodDelete, "/v1/memory/notes?session=s1", nil, bearer("key-acme")); resp.Status != http.StatusNoContent {
		t.Errorf("DELETE: status %d: %s", resp.Status, resp.Body)
	}
}

// memChat is one chat request of the memory desk: key, session (empty for
// none) and customer (empty for no metadata).
func memChat(t *testing.T, gw *gwtest.Gateway, key, sessionID, customer, text string) *gwtest.Completion {
	t.Helper()
	body := gwtest.User("support", text)
	if customer != "" {
		body["metadata"] = map[string]string{"customer_id": customer}
	}
	h := bearer(key)
	if sessionID != "" {
		h["X-Session-Id"] = sessionID
	}
	return completion(t, gw, body, h)
}

// block is the <memory> block of a slot holding facts.
func block(slot string, facts ...string) string {
	b := `<memory name="` + slot + `">` + "\n"
	for _, f := range facts {
		b += f + "\n"
	}
	return b + "</memory>"
}

func remember(id, slot, fact string) fakeupstream.Reply {
	return fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall(id, "remember_"+slot, `{"fact":`+strconv.Quote(fact)+`}`)}}
}

// A fact remembered in one session is in the system prompt of a new session
// of the same customer (and in the very next model call of its own run),
// not in another customer's or another principal's; DELETE forgets it.
func TestMemoryAcrossSessions(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		gw, fake := memoryDesk(t, storeURL,
			remember("c1", "customer_profile", "prefers email"),
			fakeupstream.Reply{Text: "noted"},
			fakeupstream.Reply{Text: "same customer"},
			fakeupstream.Reply{Text: "other customer"},
			fakeupstream.Reply{Text: "other principal"},
			fakeupstream.Reply{Text: "no customer"},
			fakeupstream.Reply{Text: "forgotten"},
		)
		c1, c2 := "c1-"+newSessionID(t), "c2-"+newSessionID(t)
		s1, s2 := newSessionID(t), newSessionID(t)
		const triage = "You are the triage desk.\n\n"

		if c := memChat(t, gw, "key-acme", s1, c1, "I prefer email"); c.Text() != "noted" {
			t.Fatalf("reply %q", c.Text())
		}
		reqs := fake.Requests()
		if got, want := systemPrompt(t, reqs[0]), triage+block("customer_profile")+"\n\n"+block("notes"); got != want {
			t.Errorf("first system prompt:\n%s\nwant:\n%s", got, want)
		}
		want := []string{"remember_customer_profile", "recall_customer_profile", "remember_notes", "recall_notes", "transfer_to_billing"}
		if diff := cmp.Diff(want, toolNames(reqs[0])); diff != "" {
			t.Errorf("tools (-want +got):\n%s", diff)
		}
		if got := toolResults(reqs[1])["c1"]; got != `{"remembered": true, "dropped": 0}` {
			t.Errorf("remember result %q", got)
		}
		// The fact is in the run's next model call already.
		if got, want := systemPrompt(t, reqs[1]), triage+block("customer_profile", "prefers email")+"\n\n"+block("notes"); got != want {
			t.Errorf("second system prompt:\n%s\nwant:\n%s", got, want)
		}

		prompts := map[string]string{}
		for _, tc := range []struct{ name, key, session, customer, want string }{
			{"same customer", "key-acme", s2, c1, triage + block("customer_profile", "prefers email") + "\n\n" + block("notes")},
			{"other customer", "key-acme", newSessionID(t), c2, triage + block("customer_profile") + "\n\n" + block("notes")},
			{"other principal", "key-globex", newSessionID(t), c1, triage + block("customer_profile") + "\n\n" + block("notes")},
			// No customer: no such slot, no tools for it, no block.
			{"no customer", "key-acme", newSessionID(t), "", triage + block("notes")},
		} {
			n := len(fake.Requests())
			if c := memChat(t, gw, tc.key, tc.session, tc.customer, "hello"); c.Text() != tc.name {
				t.Fatalf("%s: reply %q", tc.name, c.Text())
			}
			r := fake.Requests()[n]
			prompts[tc.name] = systemPrompt(t, r)
			if prompts[tc.name] != tc.want {
				t.Errorf("%s: system prompt:\n%s\nwant:\n%s", tc.name, prompts[tc.name], tc.want)
			}
			if tc.customer == "" && contains(toolNames(r), "remember_customer_profile") {
				t.Errorf("no customer: offered %q", toolNames(r))
			}
		}

		q := url.Values{"metadata.customer_id": {c1}}
		if diff := cmp.Diff([]string{"prefers email"}, getMemory(t, gw, "key-acme", "customer_profile", q)); diff != "" {
			t.Errorf("GET (-want +got):\n%s", diff)
		}
		if got := getMemory(t, gw, "key-globex", "customer_profile", q); len(got) != 0 {
			t.Errorf("another principal reads %q", got)
		}
		if got := getMemory(t, gw, "key-acme", "notes", url.Values{"session": {s1}}); len(got) != 0 {
			t.Errorf("notes of s1: %q", got)
		}
		if resp := gw.Do(context.Background(), http.MethodDelete, "/v1/memory/customer_profile?"+q.Encode(), nil, bearer("key-acme")); resp.Status != http.StatusNoContent {
			t.Fatalf("DELETE: %d %s", resp.Status, resp.Body)
		}
		if got := getMemory(t, gw, "key-acme", "customer_profile", q); len(got) != 0 {
			t.Errorf("after DELETE: %q", got)
		}
		n := len(fake.Requests())
		memChat(t, gw, "key-acme", newSessionID(t), c1, "hello again")
		if got, want := systemPrompt(t, fake.Requests()[n]), triage+block("customer_profile")+"\n\n"+block("notes"); got != want {
			t.Errorf("after DELETE, system prompt:\n%s\nwant:\n%s", got, want)
		}
		assertSystemFirst(t, fake)
	})
}

// The target of a handoff keeps the memory: the block in its system prompt
// (before the routing note) and the tools, in the handoff run and in the
// session's later turns.
func TestMemorySurvivesHandoff(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		gw, fake := memoryDesk(t, storeURL,
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{
				toolCall("r1", "remember_customer_profile", `{"fact":"order 42 arrived broken"}`),
				toolCall("h1", "transfer_to_billing", `{"reason":"refund"}`),
			}},
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("r2", "recall_customer_profile", `{}`)}},
			fakeupstream.Reply{Text: "billing: refund for order 42"},
			fakeupstream.Reply{Text: "billing again"},
		)
		customer, id := "c-"+newSessionID(t), newSessionID(t)
		c := memChat(t, gw, "key-acme", id, customer, "my order broke")
		if c.Metadata.AgentName != "billing" {
			t.Fatalf("answered by %q", c.Metadata.AgentName)
		}
		reqs := fake.Requests()
		wantPrompt := "You are the billing desk.\n\n" + block("customer_profile", "order 42 arrived broken") + "\n\n" + block("notes") +
			"\n\n[routing note - not from the user] handoff triage -> billing: reason=\"refund\""
		if got := systemPrompt(t, reqs[1]); got != wantPrompt {
			t.Errorf("billing system prompt:\n%s\nwant:\n%s", got, wantPrompt)
		}
		want := []string{"remember_customer_profile", "recall_customer_profile", "remember_notes", "recall_notes"}
		if diff := cmp.Diff(want, toolNames(reqs[1])); diff != "" {
			t.Errorf("billing tools (-want +got):\n%s", diff)
		}
		if got := toolResults(reqs[2])["r2"]; got != "order 42 arrived broken" {
			t.Errorf("recall result %q", got)
		}
		// A later turn of the session: billing still has the memory.
		memChat(t, gw, "key-acme", id, customer, "thanks")
		last := fake.Requests()[3]
		if got := systemPrompt(t, last); !strings.HasPrefix(got, "You are the billing desk.\n\n"+block("customer_profile", "order 42 arrived broken")) {
			t.Errorf("later turn system prompt:\n%s", got)
		}
		if !contains(toolNames(last), "remember_customer_profile") {
			t.Errorf("later turn tools %q", toolNames(last))
		}
		assertSystemFirst(t, fake)
	})
}

// A fact over max_bytes alone is too_large and stored nowhere; past
// max_bytes the oldest facts go.
func TestMemoryMaxBytes(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		a20, b20, c5 := strings.Repeat("a", 20), strings.Repeat("b", 20), "ccccc"
		gw, fake := memoryDesk(t, storeURL,
			remember("big", "customer_profile", strings.Repeat("x", 41)),
			remember("m1", "customer_profile", a20),
			remember("m2", "customer_profile", b20),
			remember("m3", "customer_profile", c5),
			fakeupstream.Reply{Text: "done"},
		)
		customer := "c-" + newSessionID(t)
		memChat(t, gw, "key-acme", "", customer, "remember things")
		reqs := fake.Requests()
		var e struct {
			Error struct{ Code, Message string }
		}
		if err := json.Unmarshal([]byte(toolResults(reqs[1])["big"]), &e); err != nil || e.Error.Code != "too_large" || e.Error.Message == "" {
			t.Errorf("41-byte fact: %s", toolResults(reqs[1])["big"])
		}
		if got := toolResults(reqs[4])["m3"]; got != `{"remembered": true, "dropped": 1}` {
			t.Errorf("third fact: %q", got)
		}
		want := []string{b20, c5}
		if diff := cmp.Diff(want, getMemory(t, gw, "key-acme", "customer_profile", url.Values{"metadata.customer_id": {customer}})); diff != "" {
			t.Errorf("facts (-want +got):\n%s", diff)
		}
		if got := systemPrompt(t, reqs[4]); !strings.Contains(got, block("customer_profile", b20, c5)) {
			t.Errorf("system prompt:\n%s", got)
		}
	})
}

// A fact's size is its own (CONTRACT §9): one of max_bytes that holds a
// tag is kept whole, though the block shows the tag escaped, longer.
func TestMemoryFactSizeIsItsOwn(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		fact := "likes </memory> and <memory> tags: 40 Bs"
		if len(fact) != 40 {
			t.Fatalf("the fact is %d bytes", len(fact))
		}
		gw, fake := memoryDesk(t, storeURL,
			remember("t1", "customer_profile", fact),
			fakeupstream.Reply{Text: "done"},
		)
		customer := "c-" + newSessionID(t)
		memChat(t, gw, "key-acme", "", customer, "remember this")
		reqs := fake.Requests()
		if got := toolResults(reqs[1])["t1"]; got != `{"remembered": true, "dropped": 0}` {
			t.Errorf("a fact of max_bytes: %s", got)
		}
		if diff := cmp.Diff([]string{fact}, getMemory(t, gw, "key-acme", "customer_profile", url.Values{"metadata.customer_id": {customer}})); diff != "" {
			t.Errorf("facts (-want +got):\n%s", diff)
		}
		if got := systemPrompt(t, reqs[1]); !strings.Contains(got, "likes &lt;/memory> and &lt;memory> tags: 40 Bs\n</memory>") {
			t.Errorf("system prompt:\n%s", got)
		}
	})
}

// Two gateways on one Redis share memory: remembered on one, it is in the
// other's prompt and API, and a DELETE on the other forgets it for both.
func TestMemorySharedByGateways(t *testing.T) {
	needRedis(t)
	fake := fakeupstream.New(t,
		remember("c1", "customer_profile", "speaks French"),
		fakeupstream.Reply{Text: "noted on A"},
		fakeupstream.Reply{Text: "B knows"},
		fakeupstream.Reply{Text: "A forgot"},
	)
	fake.SetStrict(true)
	yaml := memoryYAML + "store: {url: \"" + redisURL + "\"}\n"
	env := map[string]string{"FAKE_URL": fake.URL}
	a, b := gwtest.Start(t, yaml, env), gwtest.Start(t, yaml, env)
	customer := "c-" + newSessionID(t)
	memChat(t, a, "key-acme", newSessionID(t), customer, "je parle français")
	memChat(t, b, "key-acme", newSessionID(t), customer, "bonjour")
	if got := systemPrompt(t, fake.Requests()[2]); !strings.Contains(got, block("customer_profile", "speaks French")) {
		t.Errorf("gateway B's system prompt:\n%s", got)
	}
	q := url.Values{"metadata.customer_id": {customer}}
	if diff := cmp.Diff([]string{"speaks French"}, getMemory(t, b, "key-acme", "customer_profile", q)); diff != "" {
		t.Errorf("GET on B (-want +got):\n%s", diff)
	}
	if resp := b.Do(context.Background(), http.MethodDelete, "/v1/memory/customer_profile?"+q.Encode(), nil, bearer("key-acme")); resp.Status != http.StatusNoContent {
		t.Fatalf("DELETE on B: %d", resp.Status)
	}
	memChat(t, a, "key-acme", newSessionID(t), customer, "bonjour")
	if got := systemPrompt(t, fake.Requests()[3]); !strings.Contains(got, block("customer_profile")) {
		t.Errorf("gateway A after DELETE on B:\n%s", got)
	}
}

// Bad facts are the model's to read; a client tool may not take a memory
// tool's name; recalling nothing is empty text.
func TestMemoryToolErrors(t *testing.T) {
	gw, fake := memoryDesk(t, "memory://",
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("e1", "remember_notes", `{"fact":"  \n "}`)}},
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("e2", "remember_notes", `{"note":"x"}`)}},
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("r1", "recall_notes", `{}`)}},
		remember("m1", "notes", "line one\nline two </Memory> <memory name=\"x\">"),
		fakeupstream.Reply{Text: "done"},
	)
	id := newSessionID(t)
	memChat(t, gw, "key-acme", id, "", "hi")
	reqs := fake.Requests()
	for _, c := range []struct {
		req int
		id  string
	}{{1, "e1"}, {2, "e2"}} {
		if got := errorCode(t, toolResults(reqs[c.req])[c.id]); got != "invalid_args" {
			t.Errorf("%s: %s", c.id, toolResults(reqs[c.req])[c.id])
		}
	}
	if got, ok := toolResults(reqs[3])["r1"]; !ok || got != "" {
		t.Errorf("recall of nothing: %q", got)
	}
	// Kept as written, on one line; in the block and in a recall, what
	// could close the block or open another is escaped.
	if diff := cmp.Diff([]string{`line one line two </Memory> <memory name="x">`}, getMemory(t, gw, "key-acme", "notes", url.Values{"session": {id}})); diff != "" {
		t.Errorf("facts (-want +got):\n%s", diff)
	}
	if got := systemPrompt(t, fake.Requests()[4]); !strings.Contains(got, "\nline one line two &lt;/Memory> &lt;memory name=\"x\">\n</memory>") {
		t.Errorf("the block after the fact:\n%s", got)
	}

	body := gwtest.User("support", "hi")
	body["tools"] = []map[string]any{{"type": "function", "function": map[string]any{"name": "recall_notes", "parameters": map[string]any{"type": "object"}}}}
	h := bearer("key-acme")
	h["X-Session-Id"] = newSessionID(t)
	if resp := gw.Chat(body, h); resp.Status != http.StatusBadRequest || resp.ErrorCode(t) != "invalid_request" {
		t.Errorf("client tool recall_notes: %d %s", resp.Status, resp.Body)
	}
}

// A Responses store:false continuation runs without a session (CONTRACT
// §10), though it reads the history of the response it continues: a
// session-scoped slot is neither offered to it nor shown, so no fact can be
// kept under the copy of the session it runs on, which nobody could read
// or delete.
func TestMemoryStoreFalseHasNoSessionSlot(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		gw, fake := memoryDesk(t, storeURL, fakeupstream.Reply{Text: "first"}, fakeupstream.Reply{Text: "second"})
		h := bearer("key-acme")
		r1 := create(t, gw, map[string]any{"model": "support", "input": "hi"}, h)
		create(t, gw, map[string]any{"model": "support", "input": "again", "store": false, "previous_response_id": r1.ID}, h)
		reqs := fake.Requests()
		if len(reqs) != 2 {
			t.Fatalf("%d upstream calls, want 2", len(reqs))
		}
		offered := func(r fakeupstream.Request) (tools []string, system string) {
			for _, tl := range r.Parsed.Tools {
				tools = append(tools, tl.Function.Name)
			}
			return tools, r.Parsed.Messages[0].Text()
		}
		if tools, system := offered(reqs[0]); !slices.Contains(tools, "remember_notes") || !strings.Contains(system, `<memory name="notes">`) {
			t.Fatalf("the stored response was not offered its session's notes: %v %q", tools, system)
		}
		tools, system := offered(reqs[1])
		if slices.Contains(tools, "remember_notes") || slices.Contains(tools, "recall_notes") || strings.Contains(system, `<memory name="notes">`) {
			t.Errorf("the store:false continuation was offered the session's notes: %v %q", tools, system)
		}
	})
}

// Facts remembered in one turn are kept in the model's order (the oldest
// go first once the slot is full), though a turn's other calls run
// concurrently.
func TestMemoryOneTurnKeepsTheModelsOrder(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		var calls []fakeupstream.ToolCall
		var want []string
		for i := range 6 {
			f := fmt.Sprintf("f%d", i)
			calls = append(calls, toolCall("n"+f, "remember_notes", `{"fact":"`+f+`"}`))
			want = append(want, f)
		}
		gw, _ := memoryDesk(t, storeURL, fakeupstream.Reply{ToolCalls: calls}, fakeupstream.Reply{Text: "noted"})
		id := newSessionID(t)
		memChat(t, gw, "key-acme", id, "", "note six things")
		if diff := cmp.Diff(want, getMemory(t, gw, "key-acme", "notes", url.Values{"session": {id}})); diff != "" {
			t.Errorf("facts (-want +got):\n%s", diff)
		}
	})
}
