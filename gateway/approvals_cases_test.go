package gateway_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
	"github.com/switchboard-ai/switchboard/internal/gwtest"
)

// More of docs/permissions.md through the HTTP API: restarts, races,
// client tools beside approvals, other sessions' and principals'
// approvals, handoffs behind approvals.

// toolsReply is the tool_calls reply of a turn that also waits for
// approvals.
type toolsReply struct {
	Choices []struct {
		Message struct {
			ToolCalls []struct {
				ID string `json:"id"`
			} `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Metadata struct {
		Event     string         `json:"event"`
		Approvals []approvalBody `json:"approvals"`
	} `json:"metadata"`
}

// getSessionAs reads a session with header.
func getSessionAs(t *testing.T, gw *gwtest.Gateway, id string, header map[string]string) (*gwtest.Response, sessionWithApprovals) {
	t.Helper()
	r := gw.Do(context.Background(), http.MethodGet, "/v1/sessions/"+id, nil, header)
	var s sessionWithApprovals
	if r.Status == http.StatusOK {
		r.Decode(t, &s)
	}
	return r, s
}

type sessionWithApprovals struct {
	Version          int64          `json:"version"`
	PendingApprovals []approvalBody `json:"pendingApprovals"`
	Transcript       []any          `json:"transcript"`
}

// A paused run is in the store, not in the gateway: a second gateway on
// the same Redis, started after the first stopped, takes the decision and
// resumes the run.
func TestApprovalSurvivesRestart(t *testing.T) {
	needRedis(t)
	fake := fakeupstream.New(t,
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "transfer_to_billing", `{}`)}},
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("l1", "lookup_charges", `{}`)}},
		fakeupstream.Reply{Text: "Resumed elsewhere."},
	)
	fake.SetStrict(true)
	tools := newToolServer(t)
	env := map[string]string{"FAKE_URL": fake.URL, "TOOLS_URL": tools.URL}
	first := gwtest.Start(t, gatedYAML(redisURL), env)
	id := newSessionID(t)
	a := paused(t, first, gwtest.User("support", "charges?"), acme(id), "lookup_charges", `{}`)
	first.Close()

	second := gwtest.Start(t, gatedYAML(redisURL), env)
	if _, s := getSessionAs(t, second, id, acme(id)); len(s.PendingApprovals) != 1 || s.PendingApprovals[0].ID != a.ID {
		t.Fatalf("the second gateway sees %+v", s.PendingApprovals)
	}
	if r := decideOne(second, id, a.ID, acme(id), map[string]any{"approve": true}); r.Status != http.StatusOK {
		t.Fatalf("decide on the second gateway: %d %s", r.Status, r.Body)
	}
	if c := completion(t, second, emptyTurn(), acme(id)); c.Text() != "Resumed elsewhere." || c.Metadata.AgentName != "billing" {
		t.Fatalf("resumed: %q by %q", c.Text(), c.Metadata.AgentName)
	}
	if n := len(tools.got("/charges")); n != 1 {
		t.Errorf("the tool ran %d times", n)
	}
}

// Two decisions of one approval sent at once: exactly one is recorded
// (200), the other is 409, whichever comes second; the recorded decision
// is the one the 200 returned, and the resumed run carries it out.
func TestApprovalConcurrentDecisions(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		const rounds = 3
		var replies []fakeupstream.Reply
		replies = append(replies, fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "transfer_to_billing", `{}`)}})
		for round := range rounds {
			call := "l" + strconv.Itoa(round)
			replies = append(replies, fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall(call, "lookup_charges", `{}`)}},
				fakeupstream.Reply{Text: "done " + call})
		}
		gw, fake, _ := gatedDesk(t, storeURL, replies...)
		id := newSessionID(t)
		for round := range rounds {
			call := "l" + strconv.Itoa(round)
			a := paused(t, gw, gwtest.User("support", "charges?"), acme(id), "lookup_charges", `{}`)
			start := make(chan struct{})
			var wg sync.WaitGroup
			res := make([]*gwtest.Response, 2)
			for i := range res {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					res[i] = decideOne(gw, id, a.ID, acme(id), map[string]any{"approve": i == 0})
				}()
			}
			close(start)
			wg.Wait()
			var ok *gwtest.Response
			conflicts := 0
			for _, r := range res {
				switch r.Status {
				case http.StatusOK:
					ok = r
				case http.StatusConflict:
					conflicts++
				default:
					t.Fatalf("round %d: %d %s", round, r.Status, r.Body)
				}
			}
			if ok == nil || conflicts != 1 {
				t.Fatalf("round %d: %d and %d, want one 200 and one 409", round, res[0].Status, res[1].Status)
			}
			var won approvalBody
			ok.Decode(t, &won)
			_, s := getSessionAs(t, gw, id, acme(id))
			if len(s.PendingApprovals) != 0 || (won.Status != "approved" && won.Status != "rejected") {
				t.Fatalf("round %d: won %+v, still pending %+v", round, won, s.PendingApprovals)
			}
			// Resumed, the call runs if the winner approved it, else its
			// result is the rejection.
			if c := completion(t, gw, emptyTurn(), acme(id)); c.Text() != "done "+call {
				t.Fatalf("round %d: resumed to %q", round, c.Text())
			}
			reqs := fake.Requests()
			result := toolResults(reqs[len(reqs)-1])[call]
			if rejected := errorCode(t, result) == "rejected"; rejected != (won.Status == "rejected") {
				t.Errorf("round %d: the 200 said %s, the call's result is %q", round, won.Status, result)
			}
		}
	})
}

// A turn that calls a client tool and a tool behind ask: the reply is the
// tool_calls reply with metadata.approvals, and the run goes on only when
// both the client's result and the decision are in, whichever comes first.
func TestApprovalWithClientTools(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		turn := fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("l1", "lookup_charges", `{}`), toolCall("w1", "get_weather", `{"city":"Oslo"}`)}}
		gw, fake, tools := gatedDesk(t, storeURL,
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "transfer_to_billing", `{}`)}},
			turn,
			fakeupstream.Reply{Text: "Sunny, and two charges."},
			turn,
			fakeupstream.Reply{Text: "Sunny again, no charges."},
		)
		id := newSessionID(t)
		assistant := map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{"id": "w1", "type": "function", "function": map[string]any{"name": "get_weather", "arguments": `{"city":"Oslo"}`}}}}
		result := map[string]any{"role": "tool", "tool_call_id": "w1", "content": "sunny"}
		resultTurn := map[string]any{"model": "support", "tools": []any{weatherTool}, "messages": []any{assistant, result}}
		decisionTurn := map[string]any{"model": "support", "tools": []any{weatherTool}, "messages": []any{}}

		pause := func(text string) approvalBody {
			t.Helper()
			r := gw.Chat(withTools(gwtest.User("support", text), false), acme(id))
			var p toolsReply
			r.Decode(t, &p)
			if r.Status != http.StatusOK || p.Choices[0].FinishReason != "tool_calls" || len(p.Choices[0].Message.ToolCalls) != 1 ||
				p.Choices[0].Message.ToolCalls[0].ID != "w1" || len(p.Metadata.Approvals) != 1 || p.Metadata.Approvals[0].Tool != "lookup_charges" {
				t.Fatalf("not the tool_calls reply with approvals: %d %s", r.Status, r.Body)
			}
			return p.Metadata.Approvals[0]
		}
		upstream := func() int { return len(fake.Requests()) }

		// The decision first: the client's result is still owed, so the
		// reply is the tool_calls reply again, and nothing runs.
		a := pause("weather and charges?")
		if r := decideOne(gw, id, a.ID, acme(id), map[string]any{"approve": true}); r.Status != http.StatusOK {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		n := upstream()
		r := gw.Chat(decisionTurn, acme(id))
		var again toolsReply
		r.Decode(t, &again)
		if r.Status != http.StatusOK || again.Choices[0].FinishReason != "tool_calls" || len(again.Metadata.Approvals) != 0 {
			t.Fatalf("decision without the result: %d %s", r.Status, r.Body)
		}
		if upstream() != n || len(tools.got("/charges")) != 0 {
			t.Fatalf("the run went on without the client's result")
		}
		if c := completion(t, gw, resultTurn, acme(id)); c.Text() != "Sunny, and two charges." {
			t.Fatalf("%q", c.Text())
		}
		got := toolResults(fake.Requests()[upstream()-1])
		if got["w1"] != "sunny" || !strings.Contains(got["l1"], "ch_1") || len(tools.got("/charges")) != 1 {
			t.Fatalf("results %v", got)
		}

		// The client's result first: the approval still pends, so the
		// reply is the pause; the decision then resumes.
		b := pause("and now?")
		n = upstream()
		paused(t, gw, resultTurn, acme(id), "lookup_charges", `{}`)
		if upstream() != n {
			t.Fatal("the run went on without the decision")
		}
		body := emptyTurn()
		body["tools"] = []any{weatherTool}
		body["approvals"] = []any{map[string]any{"id": b.ID, "approve": false}}
		if c := completion(t, gw, body, acme(id)); c.Text() != "Sunny again, no charges." {
			t.Fatalf("%q", c.Text())
		}
		got = toolResults(fake.Requests()[upstream()-1])
		if got["w1"] != "sunny" || errorCode(t, got["l1"]) != "rejected" {
			t.Fatalf("results %v", got)
		}
	})
}

// Approvals belong to their session and principal: a body decision naming
// another session's approval is 404, another principal gets 404 for the
// session and its approvals, a malformed decision is 400; none of them
// changes anything.
func TestApprovalScopes(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		gw, fake, _ := gatedDesk(t, storeURL,
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "transfer_to_billing", `{}`)}},
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("l1", "lookup_charges", `{}`)}},
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c2", "transfer_to_billing", `{}`)}},
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("l2", "lookup_charges", `{}`)}},
		)
		one, two := newSessionID(t), newSessionID(t)
		a := paused(t, gw, gwtest.User("support", "charges?"), acme(one), "lookup_charges", `{}`)
		paused(t, gw, gwtest.User("support", "charges?"), acme(two), "lookup_charges", `{}`)
		_, before := getSessionAs(t, gw, one, acme(one))
		_, beforeTwo := getSessionAs(t, gw, two, acme(two))
		calls := len(fake.Requests())

		body := emptyTurn()
		body["approvals"] = []any{map[string]any{"id": a.ID, "approve": true}}
		if r := gw.Chat(body, acme(two)); r.Status != http.StatusNotFound || r.ErrorCode(t) != "approval_not_found" {
			t.Errorf("another session's approval in a body: %d %s", r.Status, r.Body)
		}
		// The same session id under another key is another session.
		if r, _ := getSessionAs(t, gw, one, globex(one)); r.Status != http.StatusNotFound {
			t.Errorf("another principal read the session: %d %s", r.Status, r.Body)
		}
		if r := decideOne(gw, one, a.ID, globex(one), map[string]any{"approve": true}); r.Status != http.StatusNotFound || r.ErrorCode(t) != "approval_not_found" {
			t.Errorf("another principal decided: %d %s", r.Status, r.Body)
		}
		if r := gw.Chat(body, globex(one)); r.Status != http.StatusNotFound {
			t.Errorf("another principal's body decision: %d %s", r.Status, r.Body)
		}
		stateless := gwtest.User("support", "hi")
		stateless["approvals"] = []any{map[string]any{"id": a.ID, "approve": true}}
		if r := gw.Chat(stateless, acmeAuth); r.Status != http.StatusNotFound || r.ErrorCode(t) != "approval_not_found" {
			t.Errorf("a stateless request's decision: %d %s", r.Status, r.Body)
		}
		for _, bad := range []any{map[string]any{}, map[string]any{"approve": "yes"}, map[string]any{"approve": nil}, "not json", []any{true}} {
			if r := decideOne(gw, one, a.ID, acme(one), bad); r.Status != http.StatusBadRequest || r.ErrorCode(t) != "invalid_request" {
				t.Errorf("malformed decision %v: %d %s", bad, r.Status, r.Body)
			}
		}
		for _, bad := range []any{map[string]any{"id": a.ID}, map[string]any{"id": a.ID, "approve": 1}, map[string]any{"approve": true}, "x"} {
			b := emptyTurn()
			b["approvals"] = []any{bad}
			if r := gw.Chat(b, acme(one)); r.Status != http.StatusBadRequest {
				t.Errorf("malformed body decision %v: %d %s", bad, r.Status, r.Body)
			}
		}
		if r := gw.Chat(map[string]any{"model": "support", "messages": []any{}, "approvals": "yes"}, acme(one)); r.Status != http.StatusBadRequest {
			t.Errorf("approvals not a list: %d %s", r.Status, r.Body)
		}
		_, after := getSessionAs(t, gw, one, acme(one))
		_, afterTwo := getSessionAs(t, gw, two, acme(two))
		if after.Version != before.Version || len(after.PendingApprovals) != 1 || afterTwo.Version != beforeTwo.Version || len(afterTwo.PendingApprovals) != 1 {
			t.Errorf("a refused decision changed a session: versions %d->%d and %d->%d, pending %d and %d",
				before.Version, after.Version, beforeTwo.Version, afterTwo.Version, len(after.PendingApprovals), len(afterTwo.PendingApprovals))
		}
		if n := len(fake.Requests()); n != calls {
			t.Errorf("refused requests called the upstream %d times", n-calls)
		}
	})
}

// A handoff behind ask waits while the turn's other calls run; rejected,
// the same agent goes on with the rejection as the handoff's result.
func TestApprovalHandoffRejected(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		fake := fakeupstream.New(t,
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("l1", "lookup_charges", `{}`), toolCall("r1", "escalate_refund", `{"orderId":"o-9"}`)}},
			fakeupstream.Reply{Text: "Triage still here."},
		)
		fake.SetStrict(true)
		tools := newToolServer(t)
		yaml := strings.Replace(gatedYAML(storeURL), "    model: fake/triage-model\n", "    model: fake/triage-model\n    tools: [lookup_charges]\n", 1)
		gw := gwtest.Start(t, yaml, map[string]string{"FAKE_URL": fake.URL, "TOOLS_URL": tools.URL})
		id := newSessionID(t)
		a := paused(t, gw, gwtest.User("support", "refund o-9"), acme(id), "escalate_refund", `{"orderId":"o-9"}`)
		if n := len(tools.got("/charges")); n != 1 {
			t.Fatalf("the turn's other call ran %d times before the decision, want 1", n)
		}
		if r := decideOne(gw, id, a.ID, acme(id), map[string]any{"approve": false, "reason": "no refunds today"}); r.Status != http.StatusOK {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		c := completion(t, gw, emptyTurn(), acme(id))
		if c.Text() != "Triage still here." || c.Metadata.AgentName != "triage" {
			t.Fatalf("%q by %q", c.Text(), c.Metadata.AgentName)
		}
		req := fake.Requests()[1]
		if req.Parsed.Model != "triage-model" {
			t.Errorf("model %q", req.Parsed.Model)
		}
		got := toolResults(req)
		if errorCode(t, got["r1"]) != "rejected" || !strings.Contains(got["r1"], "no refunds today") || !strings.Contains(got["l1"], "ch_1") {
			t.Errorf("results %v", got)
		}
		if n := len(tools.got("/charges")); n != 1 {
			t.Errorf("the other call ran %d times, want 1", n)
		}
		if _, s := getSessionAs(t, gw, id, acme(id)); len(s.PendingApprovals) != 0 {
			t.Errorf("pending %+v", s.PendingApprovals)
		}
	})
}

// gateDeskYAML is one agent with a memory slot and an MCP server's tool,
// both behind rules: remembering is denied, a refund asks.
const gateDeskYAML = `
providers:
  fake: {base_url: "${FAKE_URL}", timeout: 5s}
mcp_servers:
  crm: {url: "${MCP_URL}"}
memory:
  notes: {description: Notes of this conversation}
agents:
  desk:
    description: The only desk
    instructions: You are the desk.
    model: fake/desk-model
    mcp: [crm]
    permissions:
      - {tool: "remember_*", action: deny}
      - {tool: refund_card, action: ask}
graphs:
  support: {lead: desk, memory: [notes]}
`

// Memory tools and MCP tools pass the gate like any server tool: a deny
// rule on remember_notes keeps the fact out of the slot, and an MCP tool
// behind ask runs on the MCP server only once approved.
func TestApprovalGatesMemoryAndMCPTools(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		var mu sync.Mutex
		var refunds []string
		srv := mcp.NewServer(&mcp.Implementation{Name: "crm", Version: "1"}, nil)
		type refundIn struct {
			Card string `json:"card"`
		}
		mcp.AddTool(srv, &mcp.Tool{Name: "refund_card", Description: "Refunds a card"},
			func(_ context.Context, _ *mcp.CallToolRequest, in refundIn) (*mcp.CallToolResult, any, error) {
				mu.Lock()
				refunds = append(refunds, in.Card)
				mu.Unlock()
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "refunded " + in.Card}}}, nil, nil
			})
		mcpSrv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
		t.Cleanup(mcpSrv.Close)
		fake := fakeupstream.New(t,
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{
				toolCall("m1", "remember_notes", `{"fact":"wants a refund"}`),
				toolCall("p1", "refund_card", `{"card":"c-42"}`),
			}},
			fakeupstream.Reply{Text: "Refunded."},
		)
		fake.SetStrict(true)
		gw := gwtest.Start(t, gateDeskYAML+"store: {url: \""+storeURL+"\"}\n", map[string]string{"FAKE_URL": fake.URL, "MCP_URL": mcpSrv.URL})
		id := newSessionID(t)
		r := gw.Chat(gwtest.User("support", "refund card c-42"), session(id))
		var p pausedReply
		r.Decode(t, &p)
		if r.Status != http.StatusOK || len(p.Metadata.Approvals) != 1 || p.Metadata.Approvals[0].Tool != "refund_card" || p.Metadata.Approvals[0].Agent != "desk" {
			t.Fatalf("not paused for refund_card: %d %s", r.Status, r.Body)
		}
		mu.Lock()
		early := len(refunds)
		mu.Unlock()
		if early != 0 {
			t.Fatal("the MCP tool ran before it was approved")
		}
		if r := decideOne(gw, id, p.Metadata.Approvals[0].ID, session(id), map[string]any{"approve": true}); r.Status != http.StatusOK {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		if c := completion(t, gw, emptyTurn(), session(id)); c.Text() != "Refunded." {
			t.Fatalf("%q", c.Text())
		}
		got := toolResults(fake.Requests()[1])
		if errorCode(t, got["m1"]) != "denied" || got["p1"] != "refunded c-42" {
			t.Errorf("results %v", got)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(refunds) != 1 || refunds[0] != "c-42" {
			t.Errorf("refunds %v", refunds)
		}
		var facts memoryBody
		mr := gw.Do(context.Background(), http.MethodGet, "/v1/memory/notes?session="+id, nil, nil)
		if mr.Status != http.StatusOK {
			t.Fatalf("GET memory notes: %d %s", mr.Status, mr.Body)
		}
		mr.Decode(t, &facts)
		if facts.Slot != "notes" || facts.Facts == nil || len(facts.Facts) != 0 {
			t.Errorf("a denied remember stored %v", facts.Facts)
		}
	})
}
