package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
	"github.com/switchboard-ai/switchboard/internal/gwtest"
)

// hookCall is what a pre_tool_call hook is POSTed.
type hookCall struct {
	Agent      string            `json:"agent"`
	Tool       string            `json:"tool"`
	Arguments  json.RawMessage   `json:"arguments"`
	ToolCallID string            `json:"toolCallId"`
	SessionID  string            `json:"sessionId"`
	Principal  string            `json:"principal"`
	Metadata   map[string]string `json:"metadata"`
}

// hookServer is a graph's pre_tool_call (/gate) and on_approval_required
// (/notify) hooks: answer scripts /gate by tool name, and notify answers
// with notifyStatus after notifyDelay.
type hookServer struct {
	*httptest.Server
	answer       func(c hookCall) (status int, body string)
	gateDelay    time.Duration
	notifyStatus int
	notifyDelay  time.Duration

	mu      sync.Mutex
	gates   []hookCall
	notices []json.RawMessage
	noticed chan struct{}
}

func newHookServer(t *testing.T, answer func(c hookCall) (int, string)) *hookServer {
	h := &hookServer{answer: answer, notifyStatus: http.StatusNoContent, noticed: make(chan struct{}, 8)}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/gate":
			var c hookCall
			if err := json.Unmarshal(b, &c); err != nil {
				t.Errorf("gate body: %v: %s", err, b)
			}
			h.mu.Lock()
			h.gates = append(h.gates, c)
			h.mu.Unlock()
			select {
			case <-time.After(h.gateDelay):
			case <-r.Context().Done():
				return
			}
			status, body := h.answer(c)
			w.WriteHeader(status)
			_, _ = io.WriteString(w, body)
		case "/notify":
			select {
			case <-time.After(h.notifyDelay):
			case <-r.Context().Done():
			}
			h.mu.Lock()
			h.notices = append(h.notices, b)
			h.mu.Unlock()
			h.noticed <- struct{}{}
			w.WriteHeader(h.notifyStatus)
		}
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hookServer) calls() []hookCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hookCall(nil), h.gates...)
}

// hookedDesk is the gated desk with the graph's hooks on h.
func hookedDesk(t *testing.T, storeURL string, h *hookServer, extra string, replies ...fakeupstream.Reply) (*gwtest.Gateway, *fakeupstream.Server, *toolServer) {
	t.Helper()
	fake := fakeupstream.New(t, replies...)
	fake.SetStrict(true)
	tools := newToolServer(t)
	y := strings.Replace(gatedYAML(storeURL), "    max_steps: 6\n", `    max_steps: 6
    pre_tool_call: {url: "${HOOK_URL}/gate", timeout: 300ms}
    on_approval_required: {url: "${HOOK_URL}/notify", timeout: 30s}
`, 1) + extra
	// The charges tool takes a month, so that a rewrite shows.
	y = strings.Replace(y, "    parameters: {type: object, properties: {}}\n", "    parameters: {type: object, properties: {month: {type: string}}}\n", 1)
	gw := gwtest.Start(t, y, map[string]string{"FAKE_URL": fake.URL, "TOOLS_URL": tools.URL, "HOOK_URL": h.URL})
	return gw, fake, tools
}

// allowAll answers allow to every call.
func allowAll(hookCall) (int, string) { return http.StatusOK, `{"action": "allow"}` }

// The hook rewrites a handoff's arguments (the routing note shows them)
// and a tool's: it says ask, the approval carries its arguments, and once
// approved the tool runs with them, without the hook being asked again;
// the stored transcript and the model read the rewritten call. The hook
// is POSTed the call as the contract says, and on_approval_required the
// pause's approvals.
func TestPreToolCallRewriteAskApprove(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		h := newHookServer(t, func(c hookCall) (int, string) {
			switch c.Tool {
			case "transfer_to_billing":
				return http.StatusOK, `{"action": "allow", "arguments": {"reason": "hooked reason"}}`
			case "lookup_charges":
				return http.StatusOK, `{"action": "ask", "arguments": {"month": "june"}, "reason": "a person decides"}`
			}
			return http.StatusOK, `{"action": "deny"}`
		})
		gw, fake, tools := hookedDesk(t, storeURL, h, "",
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "transfer_to_billing", `{"reason": "model reason"}`)}},
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("l1", "lookup_charges", `{"month": "may"}`)}},
			fakeupstream.Reply{Text: "June had two charges."},
		)
		id := newSessionID(t)
		body := gwtest.User("support", "june charges?")
		body["metadata"] = map[string]string{"plan": "pro"}
		a := paused(t, gw, body, acme(id), "lookup_charges", `{"month":"june"}`)
		gates := h.calls()
		if len(gates) != 2 {
			t.Fatalf("the hook was asked %d times, want 2: %+v", len(gates), gates)
		}
		g := gates[0]
		if g.Agent != "triage" || g.Tool != "transfer_to_billing" || string(g.Arguments) != `{"reason":"model reason"}` || g.ToolCallID != "c1" ||
			g.SessionID != id || g.Principal != "acme" || g.Metadata["plan"] != "pro" {
			t.Errorf("hook payload %+v", g)
		}
		if gates[1].Agent != "billing" || string(gates[1].Arguments) != `{"month":"may"}` {
			t.Errorf("second hook payload %+v", gates[1])
		}
		// The pause was told to on_approval_required.
		select {
		case <-h.noticed:
		case <-time.After(5 * time.Second):
			t.Fatal("on_approval_required was not called")
		}
		var notice struct {
			SessionID string         `json:"sessionId"`
			Principal string         `json:"principal"`
			Graph     string         `json:"graph"`
			Approvals []approvalBody `json:"approvals"`
		}
		h.mu.Lock()
		_ = json.Unmarshal(h.notices[0], &notice)
		h.mu.Unlock()
		if notice.SessionID != id || notice.Principal != "acme" || notice.Graph != "support" || len(notice.Approvals) != 1 ||
			notice.Approvals[0].ID != a.ID || string(notice.Approvals[0].Arguments) != `{"month":"june"}` {
			t.Errorf("notice %+v", notice)
		}
		if r := decideOne(gw, id, a.ID, acme(id), map[string]any{"approve": true}); r.Status != http.StatusOK {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		if c := completion(t, gw, emptyTurn(), acme(id)); c.Text() != "June had two charges." {
			t.Fatalf("%q", c.Text())
		}
		if got := tools.got("/charges"); len(got) != 1 || got[0] != `{"month":"june"}` {
			t.Errorf("the tool got %q, want the hook's arguments once", got)
		}
		if n := len(h.calls()); n != 2 {
			t.Errorf("the hook was asked %d times, want 2 (not again for the approved call)", n)
		}
		reqs := fake.Requests()
		if note := systemPrompt(t, reqs[1]); !strings.Contains(note, `handoff triage -> billing: reason="hooked reason"`) {
			t.Errorf("routing note in %q", note)
		}
		// The model's next turn reads the calls as they ran.
		calls := map[string]string{}
		for _, m := range reqs[2].Parsed.Messages {
			for _, c := range m.ToolCalls {
				calls[c.ID] = c.Arguments
			}
		}
		if calls["l1"] != `{"month":"june"}` {
			t.Errorf("the model read the call as %q", calls["l1"])
		}
		var s struct {
			Transcript []struct {
				ToolCalls []struct {
					ID       string `json:"id"`
					Function struct {
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"transcript"`
		}
		gw.Do(context.Background(), http.MethodGet, "/v1/sessions/"+id, nil, acme(id)).Decode(t, &s)
		stored := map[string]string{}
		for _, m := range s.Transcript {
			for _, c := range m.ToolCalls {
				stored[c.ID] = c.Function.Arguments
			}
		}
		if stored["l1"] != `{"month":"june"}` || stored["c1"] != `{"reason":"hooked reason"}` {
			t.Errorf("stored calls %v", stored)
		}
		metrics := string(gw.Do(context.Background(), http.MethodGet, "/metrics", nil, nil).Body)
		for _, want := range []string{
			`switchboard_permission_decisions_total{decision="allowed",graph="support",tool="transfer_to_billing"} 1`,
			`switchboard_permission_decisions_total{decision="pending",graph="support",tool="lookup_charges"} 1`,
			`switchboard_permission_decisions_total{decision="approved",graph="support",tool="lookup_charges"} 1`,
		} {
			if !strings.Contains(metrics, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
	})
}

// A hook that denies, fails, times out or answers anything but a verdict
// denies the call (fail closed): the handoff does not happen and the model
// reads why.
func TestPreToolCallDeniesAndFailsClosed(t *testing.T) {
	cases := []struct {
		name   string
		status int
		body   string
		delay  time.Duration
		want   *regexp.Regexp
	}{
		{"deny with reason", 200, `{"action": "deny", "reason": "closed on sundays"}`, 0, regexp.MustCompile(`^closed on sundays$`)},
		{"deny without reason", 200, `{"action": "deny"}`, 0, regexp.MustCompile(`^"transfer_to_billing" is denied by the pre_tool_call hook$`)},
		{"status 500", 500, `{"action": "allow"}`, 0, regexp.MustCompile(`^the pre_tool_call hook failed: status 500`)},
		{"timeout", 200, `{"action": "allow"}`, time.Second, regexp.MustCompile(`^the pre_tool_call hook failed: no answer within 300ms$`)},
		{"not JSON", 200, `allow`, 0, regexp.MustCompile(`^the pre_tool_call hook failed: not a pre_tool_call answer: the answer is not a JSON object$`)},
		{"unknown action", 200, `{"action": "maybe"}`, 0, regexp.MustCompile(`unknown action "maybe"`)},
		{"no action", 200, `{"arguments": {}}`, 0, regexp.MustCompile(`the answer has no action`)},
		{"arguments not an object", 200, `{"action": "allow", "arguments": [1]}`, 0, regexp.MustCompile(`arguments must be a JSON object$`)},
		{"ask without a session", 200, `{"action": "ask"}`, 0, regexp.MustCompile(`^approval requires a session$`)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHookServer(t, func(hookCall) (int, string) { return tc.status, tc.body })
			h.gateDelay = tc.delay
			gw, fake, _ := hookedDesk(t, "memory://", h, "",
				fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "transfer_to_billing", `{}`)}},
				fakeupstream.Reply{Text: "Triage it is."},
			)
			c := completion(t, gw, gwtest.User("support", "bill?"), map[string]string{"Authorization": "Bearer key-acme"})
			if c.Text() != "Triage it is." || c.Metadata.AgentName != "triage" {
				t.Fatalf("%q by %q", c.Text(), c.Metadata.AgentName)
			}
			var res struct {
				Error struct{ Code, Message string }
			}
			raw := toolResults(fake.Requests()[1])["c1"]
			if err := json.Unmarshal([]byte(raw), &res); err != nil || res.Error.Code != "denied" || !tc.want.MatchString(res.Error.Message) {
				t.Errorf("result %s, want denied matching %s", raw, tc.want)
			}
			if strings.Contains(raw, h.URL) {
				t.Errorf("the hook's URL reached the model: %s", raw)
			}
		})
	}
}

// The stricter of the hook's action and the rule's wins: a rule's deny
// over the hook's allow, the hook's ask over no rule, a rule's ask over
// the hook's allow (an approved handoff then happens with the hook's
// arguments).
func TestPreToolCallStricterWins(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		h := newHookServer(t, func(c hookCall) (int, string) {
			switch c.Tool {
			case "escalate_refund":
				return http.StatusOK, `{"action": "allow", "arguments": {"orderId": "o-9", "note": "checked"}}`
			case "transfer_to_triage":
				return http.StatusOK, `{"action": "ask"}`
			}
			return allowAll(c)
		})
		// (The desk's max_handoffs is 2: a third handoff of the run could
		// not happen, and would be refused before anyone is asked.)
		gw, fake, tools := hookedDesk(t, storeURL, h, "",
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "transfer_to_billing", `{}`)}},
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("b1", "broken_tool", `{}`)}},
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("t1", "transfer_to_triage", `{}`)}},
		)
		id := newSessionID(t)
		paused(t, gw, gwtest.User("support", "it's broken"), acme(id), "transfer_to_triage", `{}`)
		if res := toolResults(fake.Requests()[2])["b1"]; errorCode(t, res) != "denied" || !strings.Contains(res, "is denied by a permission rule") {
			t.Errorf("rule deny over hook allow: %s", res)
		}
		if len(tools.got("/broken")) != 0 {
			t.Error("the denied tool ran")
		}

		// A rule's ask over the hook's allow, on a handoff it rewrote.
		h2 := newHookServer(t, h.answer)
		gw2, fake2, _ := hookedDesk(t, storeURL, h2, "",
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("r1", "escalate_refund", `{"orderId": "o-1"}`)}},
			fakeupstream.Reply{Text: "Refund for o-9 on its way."},
		)
		id2 := newSessionID(t)
		a := paused(t, gw2, gwtest.User("support", "refund o-1"), acme(id2), "escalate_refund", `{"orderId":"o-9","note":"checked"}`)
		body := emptyTurn()
		body["approvals"] = []any{map[string]any{"id": a.ID, "approve": true}}
		if c := completion(t, gw2, body, acme(id2)); c.Metadata.AgentName != "refunds" {
			t.Fatalf("%q by %q", c.Text(), c.Metadata.AgentName)
		}
		if note := systemPrompt(t, fake2.Requests()[1]); !strings.Contains(note, `handoff triage -> refunds: orderId="o-9", note="checked"`) {
			t.Errorf("routing note in %q", note)
		}
		if n := len(h2.calls()); n != 1 {
			t.Errorf("the hook was asked %d times, want 1", n)
		}
	})
}

// on_approval_required that is slow or fails neither holds nor breaks the
// reply.
func TestOnApprovalRequiredFailureIsNotFatal(t *testing.T) {
	h := newHookServer(t, allowAll)
	h.notifyStatus, h.notifyDelay = http.StatusInternalServerError, 1500*time.Millisecond
	gw, _, _ := hookedDesk(t, "memory://", h, "",
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("r1", "escalate_refund", `{"orderId":"o-1"}`)}},
	)
	// The first request of a process is slow (the checks of gwtest warm
	// up): not what is measured here.
	gw.Do(context.Background(), http.MethodGet, "/v1/models", nil, acme(""))
	start := time.Now()
	paused(t, gw, gwtest.User("support", "refund"), acme(newSessionID(t)), "escalate_refund", `{"orderId":"o-1"}`)
	if d := time.Since(start); d > time.Second {
		t.Errorf("the reply took %v: it waited for on_approval_required", d)
	}
	select {
	case <-h.noticed:
	case <-time.After(5 * time.Second):
		t.Fatal("on_approval_required was not called")
	}
}

// Each decision is a permission.decision event on its call's execute_tool
// or handoff span, with its source; the hook's call is a span of its own
// that carries no arguments.
func TestPermissionDecisionSpans(t *testing.T) {
	const canary = "CANARY-HOOK-ARGS-41c2"
	coll := newSpanCollector(t)
	h := newHookServer(t, func(c hookCall) (int, string) {
		if c.Tool == "lookup_charges" {
			return http.StatusOK, `{"action": "allow"}`
		}
		return allowAll(c)
	})
	gw, _, _ := hookedDesk(t, "memory://", h, "telemetry:\n  otlp_endpoint: "+coll.url+"\n",
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "transfer_to_billing", `{"reason": "`+canary+`"}`)}},
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("l1", "lookup_charges", `{}`), toolCall("b1", "broken_tool", `{}`)}},
		fakeupstream.Reply{Text: "Done."},
	)
	id := newSessionID(t)
	a := paused(t, gw, gwtest.User("support", "charges"), acme(id), "lookup_charges", `{}`)
	body := emptyTurn()
	body["approvals"] = []any{map[string]any{"id": a.ID, "approve": false}}
	completion(t, gw, body, acme(id))
	gw.Close() // flush spans
	got := coll.decisions()
	want := []string{
		"handoff triage -> billing: allowed/hook",
		"execute_tool lookup_charges: pending/rule", // the rule's ask over the hook's allow
		"execute_tool broken_tool: denied/rule",
		"execute_tool lookup_charges: rejected/approver",
	}
	for _, w := range want {
		if !strings.Contains(strings.Join(got, "\n"), w) {
			t.Errorf("no decision %q among\n%s", w, strings.Join(got, "\n"))
		}
	}
	if !coll.has("pre_tool_call transfer_to_billing") {
		t.Error("no pre_tool_call span")
	}
	if coll.contains(canary) {
		t.Error("the call's arguments reached a span without capture_content")
	}
}

// spanCollector is an OTLP/HTTP endpoint that keeps the exported spans.
type spanCollector struct {
	url   string
	mu    sync.Mutex
	spans []*spanSeen
	raw   []byte
}

type spanSeen struct {
	name   string
	events []string // "decision/source" of permission.decision events
}

func newSpanCollector(t *testing.T) *spanCollector {
	c := &spanCollector{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var req coltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		c.raw = append(c.raw, b...)
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					seen := &spanSeen{name: sp.Name}
					for _, ev := range sp.Events {
						if ev.Name != "permission.decision" {
							continue
						}
						attrs := map[string]string{}
						for _, kv := range ev.Attributes {
							attrs[kv.Key] = kv.Value.GetStringValue()
						}
						seen.events = append(seen.events, attrs["switchboard.permission.decision"]+"/"+attrs["switchboard.permission.source"])
					}
					c.spans = append(c.spans, seen)
				}
			}
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	c.url = srv.URL
	return c
}

// decisions lists "span: decision/source" for every decision event.
func (c *spanCollector) decisions() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, s := range c.spans {
		for _, e := range s.events {
			out = append(out, s.name+": "+e)
		}
	}
	return out
}

func (c *spanCollector) has(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.spans {
		if s.name == name {
			return true
		}
	}
	return false
}

func (c *spanCollector) contains(s string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Contains(string(c.raw), s)
}

// A sub-agent tool passes the hook like any server tool: its rewritten
// arguments are the task the sub-agent gets.
func TestPreToolCallSubagentTool(t *testing.T) {
	h := newHookServer(t, func(c hookCall) (int, string) {
		if c.Tool == "ask_researcher" {
			return http.StatusOK, `{"action": "allow", "arguments": {"task": "find the boiling point (redacted)"}}`
		}
		return http.StatusOK, `{"action": "deny"}`
	})
	extra := "    pre_tool_call: {url: \"" + h.URL + "/gate\"}\n"
	gw, fake := research(t, extra,
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "ask_researcher", `{"task":"find the boiling point for card 4111"}`)}},
		fakeupstream.Reply{Text: "100 C"},
		fakeupstream.Reply{Text: "Water boils at 100 C."},
	)
	if c := completion(t, gw, gwtest.User("research", "When does water boil?"), nil); c.Text() != "Water boils at 100 C." {
		t.Fatalf("%q", c.Text())
	}
	gates := h.calls()
	if len(gates) != 1 || gates[0].Tool != "ask_researcher" || gates[0].Agent != "lead" {
		t.Fatalf("hook calls %+v", gates)
	}
	sub := fake.Requests()[1]
	last := sub.Parsed.Messages[len(sub.Parsed.Messages)-1]
	if last.Text() != "find the boiling point (redacted)" {
		t.Errorf("the sub-agent's task %q", last.Text())
	}
	for _, r := range fake.Requests() {
		if strings.Contains(string(r.Body), "card 4111") {
			t.Errorf("the model's original arguments reached %s", r.Parsed.Model)
		}
	}
}

// A handoff that waited for the turn's approvals meets the hook only when
// the turn resumes, after its assistant message was stored: the rewrite
// still reaches the routing note and the stored call.
func TestPreToolCallRewritesResumedHandoff(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		h := newHookServer(t, func(c hookCall) (int, string) {
			if c.Tool == "transfer_to_triage" {
				return http.StatusOK, `{"action": "allow", "arguments": {"reason": "hooked"}}`
			}
			return allowAll(c)
		})
		gw, fake, tools := hookedDesk(t, storeURL, h, "",
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "transfer_to_billing", `{}`)}},
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("l1", "lookup_charges", `{}`), toolCall("t1", "transfer_to_triage", `{"reason": "secret 4111"}`)}},
			fakeupstream.Reply{Text: "Back at triage."},
		)
		id := newSessionID(t)
		a := paused(t, gw, gwtest.User("support", "charges, then back"), acme(id), "lookup_charges", `{}`)
		for _, c := range h.calls() {
			if c.Tool == "transfer_to_triage" {
				t.Fatal("the waiting handoff was put to the hook before the turn resumed")
			}
		}
		body := emptyTurn()
		body["approvals"] = []any{map[string]any{"id": a.ID, "approve": true}}
		if c := completion(t, gw, body, acme(id)); c.Text() != "Back at triage." || c.Metadata.AgentName != "triage" {
			t.Fatalf("%q by %q", c.Text(), c.Metadata.AgentName)
		}
		if len(tools.got("/charges")) != 1 {
			t.Error("the approved tool did not run once")
		}
		last := fake.Requests()[2]
		if note := systemPrompt(t, last); !strings.Contains(note, `handoff billing -> triage: reason="hooked"`) {
			t.Errorf("routing note in %q", note)
		}
		if strings.Contains(string(last.Body), "secret 4111") {
			t.Error("the model read the call's original arguments")
		}
		s := gw.Do(context.Background(), http.MethodGet, "/v1/sessions/"+id, nil, acme(id))
		if s.Status != http.StatusOK || strings.Contains(string(s.Body), "secret 4111") || !strings.Contains(string(s.Body), `hooked`) {
			t.Errorf("stored session: %d %s", s.Status, s.Body)
		}
	})
}

// A gateway that shuts down gives on_approval_required calls in flight 5s,
// then cancels them: shutdown is not held for the hook's whole timeout
// (30s here), and no call is left running.
func TestOnApprovalRequiredShutdown(t *testing.T) {
	h := newHookServer(t, allowAll)
	h.notifyDelay = time.Minute
	gw, _, _ := hookedDesk(t, "memory://", h, "",
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("r1", "escalate_refund", `{"orderId":"o-1"}`)}},
	)
	paused(t, gw, gwtest.User("support", "refund"), acme(newSessionID(t)), "escalate_refund", `{"orderId":"o-1"}`)
	start := time.Now()
	gw.Close()
	if d := time.Since(start); d < 4*time.Second || d > 8*time.Second {
		t.Errorf("shutdown took %v", d)
	}
	select {
	case <-h.noticed: // the handler saw its request cancelled
	case <-time.After(5 * time.Second):
		t.Error("the on_approval_required call was left running")
	}
}

// A call rejected because the user sent a new message is a rejected/approver
// event on the request's span (its own span ended with the pause), counted
// once the run saved the rejection.
func TestMovedOnDecisionSpan(t *testing.T) {
	coll := newSpanCollector(t)
	h := newHookServer(t, allowAll)
	gw, _, _ := hookedDesk(t, "memory://", h, "telemetry:\n  otlp_endpoint: "+coll.url+"\n",
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "transfer_to_billing", `{}`)}},
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("l1", "lookup_charges", `{}`)}},
		fakeupstream.Reply{Text: "Fine."},
	)
	id := newSessionID(t)
	paused(t, gw, gwtest.User("support", "charges"), acme(id), "lookup_charges", `{}`)
	completion(t, gw, gwtest.User("support", "never mind"), acme(id))
	gw.Close() // flush spans
	got := strings.Join(coll.decisions(), "\n")
	if !strings.Contains(got, "POST /v1/chat/completions: rejected/approver") {
		t.Errorf("no rejected/approver event on the request's span among\n%s", got)
	}
}

// A turn's calls are put to the hook concurrently, and their approvals
// stored as each answer comes; the session lists them pending in the
// order of the calls, as the pause did.
func TestPendingApprovalsInCallOrder(t *testing.T) {
	h := newHookServer(t, func(c hookCall) (int, string) {
		if c.Tool != "lookup_charges" {
			return http.StatusOK, `{"action": "allow"}`
		}
		if strings.Contains(string(c.Arguments), "may") {
			time.Sleep(60 * time.Millisecond) // the first call's answer comes last
		}
		return http.StatusOK, `{"action": "ask"}`
	})
	gw, _, _ := hookedDesk(t, "memory://", h, "",
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "transfer_to_billing", `{}`)}},
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{
			toolCall("l1", "lookup_charges", `{"month":"may"}`),
			toolCall("l2", "lookup_charges", `{"month":"june"}`),
		}},
	)
	id := newSessionID(t)
	var p pausedReply
	gw.Chat(gwtest.User("support", "my charges?"), acme(id)).Decode(t, &p)
	_, s := getSessionAs(t, gw, id, acme(id))
	var reply, listed []string
	for _, a := range p.Metadata.Approvals {
		reply = append(reply, a.ToolCallID)
	}
	for _, a := range s.PendingApprovals {
		listed = append(listed, a.ToolCallID)
	}
	if want := []string{"l1", "l2"}; !slices.Equal(reply, want) || !slices.Equal(listed, want) {
		t.Errorf("the pause lists %v, the session %v; want %v for both", reply, listed, want)
	}
}
