package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
	"github.com/switchboard-ai/switchboard/internal/gwtest"
)

// gatedYAML is the desk with two keys and permission rules: the charges
// tool and the refund handoff wait for a person, broken_tool is denied.
func gatedYAML(storeURL string) string {
	y := strings.Replace(deskYAML, "server:\n  listen: 127.0.0.1:0\n", authYAML, 1)
	y = strings.Replace(y, "    max_steps: 6\n", `    max_steps: 6
    permissions:
      - {tool: escalate_refund, action: ask}
      - {tool: "broken_*", action: deny}
`, 1)
	y = strings.Replace(y, "    tools: [lookup_charges, broken_tool]\n", `    tools: [lookup_charges, broken_tool]
    permissions:
      - {tool: lookup_charges, action: ask}
`, 1)
	if storeURL != "" {
		y += "store: {url: \"" + storeURL + "\"}\n"
	}
	return y
}

func gatedDesk(t *testing.T, storeURL string, replies ...fakeupstream.Reply) (*gwtest.Gateway, *fakeupstream.Server, *toolServer) {
	t.Helper()
	fake := fakeupstream.New(t, replies...)
	fake.SetStrict(true)
	tools := newToolServer(t)
	gw := gwtest.Start(t, gatedYAML(storeURL), map[string]string{"FAKE_URL": fake.URL, "TOOLS_URL": tools.URL})
	return gw, fake, tools
}

type approvalBody struct {
	ID         string          `json:"id"`
	Tool       string          `json:"tool"`
	Arguments  json.RawMessage `json:"arguments"`
	Agent      string          `json:"agent"`
	ToolCallID string          `json:"toolCallId"`
	Status     string          `json:"status"`
	ExpiresAt  int64           `json:"expiresAt"`
}

type pausedReply struct {
	Choices []struct {
		Message struct {
			Content *string `json:"content"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Metadata struct {
		AgentName string         `json:"agentName"`
		SessionID string         `json:"sessionId"`
		Event     string         `json:"event"`
		Approvals []approvalBody `json:"approvals"`
	} `json:"metadata"`
}

var approvalID = regexp.MustCompile(`^apr_[0-9a-f]{32}$`)

func acme(id string) map[string]string {
	return map[string]string{"X-Session-Id": id, "Authorization": "Bearer key-acme"}
}

func globex(id string) map[string]string {
	return map[string]string{"X-Session-Id": id, "Authorization": "Bearer key-globex"}
}

// paused sends body and checks the approval_required reply.
func paused(t *testing.T, gw *gwtest.Gateway, body any, header map[string]string, tool, args string) approvalBody {
	t.Helper()
	r := gw.Chat(body, header)
	if r.Status != http.StatusOK {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	var p pausedReply
	r.Decode(t, &p)
	if len(p.Choices) != 1 || p.Choices[0].FinishReason != "stop" || p.Metadata.Event != "approval_required" || len(p.Metadata.Approvals) != 1 {
		t.Fatalf("not an approval_required reply: %s", r.Body)
	}
	a := p.Metadata.Approvals[0]
	if want := "Approval required: " + tool + " " + args; p.Choices[0].Message.Content == nil || *p.Choices[0].Message.Content != want {
		t.Errorf("content %v, want %q", p.Choices[0].Message.Content, want)
	}
	if !approvalID.MatchString(a.ID) || a.Tool != tool || string(a.Arguments) != args || a.Status != "pending" || a.ExpiresAt == 0 || a.ToolCallID == "" || a.Agent == "" {
		t.Errorf("approval %+v", a)
	}
	return a
}

func decideOne(gw *gwtest.Gateway, id, apr string, header map[string]string, body any) *gwtest.Response {
	return gw.Do(context.Background(), http.MethodPost, "/v1/sessions/"+id+"/approvals/"+apr, body, header)
}

// askLookup are the replies that bring a session to billing and have it
// call lookup_charges, which billing's rules ask about, then rest.
func askLookup(rest ...fakeupstream.Reply) []fakeupstream.Reply {
	return append([]fakeupstream.Reply{
		{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "transfer_to_billing", `{}`)}},
		{ToolCalls: []fakeupstream.ToolCall{toolCall("l1", "lookup_charges", `{}`)}},
	}, rest...)
}

func emptyTurn() map[string]any {
	return map[string]any{"model": "support", "messages": []any{}}
}

// ask pauses the run; the approval is decided through its endpoint (a
// second decision is 409, another principal gets 404), and the next
// request, with no new message, runs the tool and goes on.
func TestApprovalApproveResumes(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		gw, fake, tools := gatedDesk(t, storeURL, askLookup(
			fakeupstream.Reply{Text: "You were charged twice."},
		)...)
		id := newSessionID(t)
		a := paused(t, gw, gwtest.User("support", "why two charges?"), acme(id), "lookup_charges", `{}`)
		if len(tools.got("/charges")) != 0 {
			t.Fatal("the tool ran before it was approved")
		}
		var s struct {
			PendingApprovals []approvalBody `json:"pendingApprovals"`
			Transcript       []struct {
				Content any `json:"content"`
			} `json:"transcript"`
		}
		gw.Do(context.Background(), http.MethodGet, "/v1/sessions/"+id, nil, acme(id)).Decode(t, &s)
		if len(s.PendingApprovals) != 1 || s.PendingApprovals[0].ID != a.ID {
			t.Fatalf("pendingApprovals %+v", s.PendingApprovals)
		}
		for _, m := range s.Transcript {
			if c, _ := m.Content.(string); strings.HasPrefix(c, "Approval required") {
				t.Errorf("the approval message was stored: %q", c)
			}
		}
		if r := decideOne(gw, id, a.ID, globex(id), map[string]any{"approve": true}); r.Status != http.StatusNotFound || r.ErrorCode(t) != "approval_not_found" {
			t.Fatalf("another principal: %d %s", r.Status, r.Body)
		}
		if r := decideOne(gw, id, "apr_00000000000000000000000000000000", acme(id), map[string]any{"approve": true}); r.Status != http.StatusNotFound {
			t.Fatalf("unknown approval: %d %s", r.Status, r.Body)
		}
		if r := decideOne(gw, id, a.ID, acme(id), map[string]any{"approve": "yes"}); r.Status != http.StatusBadRequest {
			t.Fatalf("malformed decision: %d %s", r.Status, r.Body)
		}
		r := decideOne(gw, id, a.ID, acme(id), map[string]any{"approve": true})
		var got approvalBody
		if r.Status != http.StatusOK {
			t.Fatalf("decide: %d %s", r.Status, r.Body)
		}
		r.Decode(t, &got)
		if got.ID != a.ID || got.Status != "approved" {
			t.Fatalf("decided approval %+v", got)
		}
		if r := decideOne(gw, id, a.ID, acme(id), map[string]any{"approve": false}); r.Status != http.StatusConflict || r.ErrorCode(t) != "approval_decided" {
			t.Fatalf("second decision: %d %s", r.Status, r.Body)
		}
		c := completion(t, gw, emptyTurn(), acme(id))
		if c.Text() != "You were charged twice." || c.Metadata.AgentName != "billing" {
			t.Fatalf("resumed: %q by %q", c.Text(), c.Metadata.AgentName)
		}
		if n := len(tools.got("/charges")); n != 1 {
			t.Fatalf("the tool ran %d times, want 1", n)
		}
		reqs := fake.Requests()
		if len(reqs) != 3 || !strings.Contains(toolResults(reqs[2])["l1"], "ch_1") {
			t.Fatalf("%d upstream requests; last results %v", len(reqs), toolResults(reqs[len(reqs)-1]))
		}
		for _, m := range reqs[2].Parsed.Messages {
			if strings.Contains(m.Text(), "Approval required") {
				t.Error("the approval message reached a provider")
			}
		}
		gw.Do(context.Background(), http.MethodGet, "/v1/sessions/"+id, nil, acme(id)).Decode(t, &s)
		if len(s.PendingApprovals) != 0 {
			t.Errorf("pendingApprovals after the run: %+v", s.PendingApprovals)
		}
	})
}

// A rejection decided in the next chat request's `approvals` reaches the
// model as the call's result, and the tool never runs.
func TestApprovalRejectInBody(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		gw, fake, tools := gatedDesk(t, storeURL, askLookup(
			fakeupstream.Reply{Text: "I may not look."},
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("l2", "lookup_charges", `{}`)}},
			fakeupstream.Reply{Text: "Not looked either."},
		)...)
		id := newSessionID(t)
		a := paused(t, gw, gwtest.User("support", "charges?"), acme(id), "lookup_charges", `{}`)
		body := emptyTurn()
		body["approvals"] = []any{map[string]any{"id": a.ID, "approve": false, "reason": "not today"}}
		if c := completion(t, gw, body, acme(id)); c.Text() != "I may not look." {
			t.Fatalf("%q", c.Text())
		}
		res := toolResults(fake.Requests()[2])["l1"]
		if errorCode(t, res) != "rejected" || !strings.Contains(res, "not today") {
			t.Errorf("rejected result %q", res)
		}
		// Without a reason the message is the default one.
		b := paused(t, gw, gwtest.User("support", "and now?"), acme(id), "lookup_charges", `{}`)
		body["approvals"] = []any{map[string]any{"id": b.ID, "approve": false}}
		completion(t, gw, body, acme(id))
		if res := toolResults(fake.Requests()[4])["l2"]; !strings.Contains(res, "rejected by the approver") {
			t.Errorf("rejected result %q", res)
		}
		if len(tools.got("/charges")) != 0 {
			t.Error("a rejected tool ran")
		}
		// Deciding it again in a body is 409.
		if r := gw.Chat(body, acme(id)); r.Status != http.StatusConflict {
			t.Errorf("decided twice in a body: %d %s", r.Status, r.Body)
		}
	})
}

// deny answers the call with a denied result without running it; ask
// without a session is denied too.
func TestPermissionDenyAndStatelessAsk(t *testing.T) {
	gw, fake, tools := gatedDesk(t, "",
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "transfer_to_billing", `{}`)}},
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("b1", "broken_tool", `{}`), toolCall("l1", "lookup_charges", `{}`)}},
		fakeupstream.Reply{Text: "done"},
	)
	c := completion(t, gw, gwtest.User("support", "x"), map[string]string{"Authorization": "Bearer key-acme"})
	if c.Text() != "done" {
		t.Fatalf("%q", c.Text())
	}
	results := toolResults(fake.Requests()[2])
	if errorCode(t, results["b1"]) != "denied" {
		t.Errorf("denied tool result %q", results["b1"])
	}
	if errorCode(t, results["l1"]) != "denied" || !strings.Contains(results["l1"], "approval requires a session") {
		t.Errorf("stateless ask result %q", results["l1"])
	}
	if len(tools.got("/broken")) != 0 || len(tools.got("/charges")) != 0 {
		t.Error("a denied tool ran")
	}
}

// A handoff behind ask waits for its approval; approved, it happens at the
// next request.
func TestApprovalGatesHandoff(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		gw, fake, _ := gatedDesk(t, storeURL,
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("r1", "escalate_refund", `{"orderId":"o-7"}`)}},
			fakeupstream.Reply{Text: "Refund on its way."},
		)
		id := newSessionID(t)
		a := paused(t, gw, gwtest.User("support", "refund o-7"), acme(id), "escalate_refund", `{"orderId":"o-7"}`)
		if a.Agent != "triage" {
			t.Errorf("agent %q", a.Agent)
		}
		if r := decideOne(gw, id, a.ID, acme(id), map[string]any{"approve": true}); r.Status != http.StatusOK {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		c := completion(t, gw, emptyTurn(), acme(id))
		if c.Metadata.AgentName != "refunds" || c.Text() != "Refund on its way." {
			t.Fatalf("%q by %q", c.Text(), c.Metadata.AgentName)
		}
		if m := fake.Requests()[1].Parsed.Model; m != "refunds-model" {
			t.Errorf("model %q", m)
		}
	})
}

// Only a paused session's request may carry no message.
func TestEmptyMessagesOnlyWhenPaused(t *testing.T) {
	gw, _, _ := gatedDesk(t, "memory://")
	if r := gw.Chat(emptyTurn(), map[string]string{"Authorization": "Bearer key-acme"}); r.Status != http.StatusBadRequest {
		t.Errorf("stateless: %d %s", r.Status, r.Body)
	}
	if r := gw.Chat(emptyTurn(), acme(newSessionID(t))); r.Status != http.StatusBadRequest {
		t.Errorf("a session with nothing pending: %d %s", r.Status, r.Body)
	}
	body := emptyTurn()
	body["approvals"] = []any{map[string]any{"id": "apr_1"}}
	if r := gw.Chat(body, acme(newSessionID(t))); r.Status != http.StatusBadRequest {
		t.Errorf("a decision without approve: %d %s", r.Status, r.Body)
	}
	body["approvals"] = []any{map[string]any{"id": "apr_1", "approve": true}}
	if r := gw.Chat(body, acme(newSessionID(t))); r.Status != http.StatusNotFound || r.ErrorCode(t) != "approval_not_found" {
		t.Errorf("an unknown approval in a body: %d %s", r.Status, r.Body)
	}
}

// remember: true approves the agent's later calls of the tool without
// asking, until a handoff.
func TestApprovalRemember(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		gw, _, tools := gatedDesk(t, storeURL, askLookup(
			fakeupstream.Reply{Text: "Two charges."},
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("l2", "lookup_charges", `{}`)}},
			fakeupstream.Reply{Text: "Still two."},
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("t1", "transfer_to_triage", `{}`)}},
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c2", "transfer_to_billing", `{}`)}},
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("l3", "lookup_charges", `{}`)}},
		)...)
		id := newSessionID(t)
		a := paused(t, gw, gwtest.User("support", "charges?"), acme(id), "lookup_charges", `{}`)
		if r := decideOne(gw, id, a.ID, acme(id), map[string]any{"approve": true, "remember": true}); r.Status != http.StatusOK {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		completion(t, gw, emptyTurn(), acme(id))
		if c := completion(t, gw, gwtest.User("support", "again?"), acme(id)); c.Text() != "Still two." {
			t.Fatalf("a remembered approval asked again: %q", c.Text())
		}
		if n := len(tools.got("/charges")); n != 2 {
			t.Fatalf("the tool ran %d times, want 2", n)
		}
		// Away to triage and back: the remembered approval is gone.
		paused(t, gw, gwtest.User("support", "start over"), acme(id), "lookup_charges", `{}`)
	})
}

// Past approval_ttl a pending approval is rejected as expired: its call's
// result says so, and deciding it is 409.
func TestApprovalExpires(t *testing.T) {
	fake := fakeupstream.New(t,
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("r1", "escalate_refund", `{"orderId":"o-1"}`)}},
		fakeupstream.Reply{Text: "Too late for that."},
	)
	fake.SetStrict(true)
	tools := newToolServer(t)
	yaml := strings.Replace(gatedYAML("memory://"), "    max_steps: 6\n", "    max_steps: 6\n    approval_ttl: 1s\n", 1)
	gw := gwtest.Start(t, yaml, map[string]string{"FAKE_URL": fake.URL, "TOOLS_URL": tools.URL})
	id := newSessionID(t)
	a := paused(t, gw, gwtest.User("support", "refund"), acme(id), "escalate_refund", `{"orderId":"o-1"}`)
	// expiresAt is in whole seconds: two seconds are past it whatever the
	// clock's fraction was.
	time.Sleep(2 * time.Second)
	if r := decideOne(gw, id, a.ID, acme(id), map[string]any{"approve": true}); r.Status != http.StatusConflict {
		t.Fatalf("deciding an expired approval: %d %s", r.Status, r.Body)
	}
	c := completion(t, gw, emptyTurn(), acme(id))
	if c.Text() != "Too late for that." || c.Metadata.AgentName != "triage" {
		t.Fatalf("%q by %q", c.Text(), c.Metadata.AgentName)
	}
	if res := toolResults(fake.Requests()[1])["r1"]; errorCode(t, res) != "rejected" || !strings.Contains(res, `"expired"`) {
		t.Errorf("result %q", res)
	}
}

// A decided approval is kept for approval_ttl after its decision (deciding
// it again is 409), then the session's next save drops it (404). An
// expired one counts as expired.
func TestDecidedApprovalsPruned(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		fake := fakeupstream.New(t,
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("r1", "escalate_refund", `{"orderId":"o-1"}`)}},
			fakeupstream.Reply{Text: "Refunds here."},
			fakeupstream.Reply{Text: "Still here."},
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("r2", "transfer_to_triage", `{}`)}},
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("r3", "escalate_refund", `{"orderId":"o-2"}`)}},
			fakeupstream.Reply{Text: "Expired, sorry."},
		)
		fake.SetStrict(true)
		tools := newToolServer(t)
		yaml := strings.Replace(gatedYAML(storeURL), "    max_steps: 6\n", "    max_steps: 6\n    approval_ttl: 2s\n", 1)
		yaml = strings.Replace(yaml, "    instructions: You are the refunds desk.\n", "    instructions: You are the refunds desk.\n    handoffs: [triage]\n", 1)
		gw := gwtest.Start(t, yaml, map[string]string{"FAKE_URL": fake.URL, "TOOLS_URL": tools.URL})
		// The first request of a process is slow (the checks of gwtest warm
		// up); the approval's short life must not start before it.
		gw.Do(context.Background(), http.MethodGet, "/v1/models", nil, acme(""))
		id := newSessionID(t)
		a := paused(t, gw, gwtest.User("support", "refund"), acme(id), "escalate_refund", `{"orderId":"o-1"}`)
		if r := decideOne(gw, id, a.ID, acme(id), map[string]any{"approve": true}); r.Status != http.StatusOK {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		if c := completion(t, gw, emptyTurn(), acme(id)); c.Text() != "Refunds here." {
			t.Fatalf("%q", c.Text())
		}
		if r := decideOne(gw, id, a.ID, acme(id), map[string]any{"approve": false}); r.Status != http.StatusConflict {
			t.Fatalf("within approval_ttl: %d %s", r.Status, r.Body)
		}
		// decidedAt is in whole seconds; expiresAt is at least 1s away.
		time.Sleep(3100 * time.Millisecond)
		if r := decideOne(gw, id, a.ID, acme(id), map[string]any{"approve": false}); r.Status != http.StatusConflict {
			t.Fatalf("past approval_ttl, before any save: %d %s", r.Status, r.Body)
		}
		completion(t, gw, gwtest.User("support", "thanks"), acme(id))
		if r := decideOne(gw, id, a.ID, acme(id), map[string]any{"approve": false}); r.Status != http.StatusNotFound || r.ErrorCode(t) != "approval_not_found" {
			t.Fatalf("after the next save: %d %s", r.Status, r.Body)
		}

		// An approval left to expire is counted as expired when its call
		// is answered.
		paused(t, gw, gwtest.User("support", "another refund"), acme(id), "escalate_refund", `{"orderId":"o-2"}`)
		time.Sleep(3100 * time.Millisecond)
		if c := completion(t, gw, emptyTurn(), acme(id)); c.Text() != "Expired, sorry." {
			t.Fatalf("%q", c.Text())
		}
		metrics := string(gw.Do(context.Background(), http.MethodGet, "/metrics", nil, nil).Body)
		for _, want := range []string{
			`switchboard_permission_decisions_total{decision="pending",graph="support",tool="escalate_refund"} 2`,
			`switchboard_permission_decisions_total{decision="approved",graph="support",tool="escalate_refund"} 1`,
			`switchboard_permission_decisions_total{decision="expired",graph="support",tool="escalate_refund"} 1`,
			`switchboard_permission_decisions_total{decision="allowed",graph="support",tool="transfer_to_triage"} 1`,
		} {
			if !strings.Contains(metrics, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
	})
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// A handoff that needs an approval and waits for its turn's other calls
// is asked about in the same pause (CONTRACT §6: "Each pending call gets an
// approval"): one round of decisions runs the tool and takes the handoff.
func TestWaitingHandoffAskedInTheSamePause(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		fake := fakeupstream.New(t,
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "transfer_to_billing", `{}`)}},
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("l1", "lookup_charges", `{}`), toolCall("h1", "transfer_to_triage", `{}`)}},
			fakeupstream.Reply{Text: "Triage again."},
		)
		fake.SetStrict(true)
		tools := newToolServer(t)
		yaml := strings.Replace(gatedYAML(storeURL), "      - {tool: escalate_refund, action: ask}\n",
			"      - {tool: escalate_refund, action: ask}\n      - {tool: transfer_to_triage, action: ask}\n", 1)
		gw := gwtest.Start(t, yaml, map[string]string{"FAKE_URL": fake.URL, "TOOLS_URL": tools.URL})
		id := newSessionID(t)
		r := gw.Chat(gwtest.User("support", "charged twice"), acme(id))
		var p pausedReply
		r.Decode(t, &p)
		var asked []string
		for _, a := range p.Metadata.Approvals {
			asked = append(asked, a.Tool)
			if dr := decideOne(gw, id, a.ID, acme(id), map[string]any{"approve": true}); dr.Status != http.StatusOK {
				t.Fatalf("decide %s: %d %s", a.Tool, dr.Status, dr.Body)
			}
		}
		if !slices.Equal(asked, []string{"lookup_charges", "transfer_to_triage"}) || p.Metadata.Event != "approval_required" {
			t.Fatalf("the pause asked about %v: %s", asked, r.Body)
		}
		c := completion(t, gw, emptyTurn(), acme(id))
		if c.Text() != "Triage again." || c.Metadata.AgentName != "triage" {
			t.Fatalf("after one round of decisions: %q by %q", c.Text(), c.Metadata.AgentName)
		}
		if n := len(tools.got("/charges")); n != 1 {
			t.Errorf("the tool ran %d times, want once", n)
		}
	})
}
