package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
	"github.com/switchboard-ai/switchboard/internal/gwtest"
)

// The next request of a session paused for approvals (CONTRACT §6): a new
// user message rejects what is pending, an approved call still runs before
// it, a system message is context, and a refused request changes nothing.
// The gated desk and its helpers are approvals_test.go's.

// A new user message while approvals are pending rejects them, and the run
// goes on with it; streamed, the pause is one chunk with the approvals.
func TestApprovalNewMessageRejectsStreamed(t *testing.T) {
	gw, fake, tools := gatedDesk(t, "memory://", askLookup(
		fakeupstream.Reply{Text: "Fine, something else."},
	)...)
	id := newSessionID(t)
	body := gwtest.User("support", "charges?")
	body["stream"] = true
	r := gw.Chat(body, acme(id))
	data := gwtest.SSE(t, r.Body)
	if len(data) < 3 || data[len(data)-1] != "[DONE]" {
		t.Fatalf("stream %s", r.Body)
	}
	type chunk struct {
		Choices []struct {
			Delta struct {
				Content *string `json:"content"`
			} `json:"delta"`
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
		Metadata struct {
			Event     string         `json:"event"`
			Approvals []approvalBody `json:"approvals"`
		} `json:"metadata"`
	}
	var text, finish string
	var aps []approvalBody
	for _, d := range data[:len(data)-1] {
		var c chunk
		if err := json.Unmarshal([]byte(d), &c); err != nil {
			t.Fatal(err)
		}
		if c.Metadata.Event == "approval_required" {
			aps = c.Metadata.Approvals
			text = *c.Choices[0].Delta.Content
		}
		if len(c.Choices) > 0 && c.Choices[0].FinishReason != nil {
			finish = *c.Choices[0].FinishReason
		}
	}
	if text != "Approval required: lookup_charges {}" || finish != "stop" || len(aps) != 1 {
		t.Fatalf("text %q finish %q approvals %+v", text, finish, aps)
	}
	c := completion(t, gw, gwtest.User("support", "never mind"), acme(id))
	if c.Text() != "Fine, something else." {
		t.Fatalf("%q", c.Text())
	}
	res := toolResults(fake.Requests()[2])["l1"]
	if errorCode(t, res) != "rejected" || !strings.Contains(res, "the user sent a new message instead") {
		t.Errorf("result %q", res)
	}
	if len(tools.got("/charges")) != 0 {
		t.Error("the rejected tool ran")
	}
	if r := decideOne(gw, id, aps[0].ID, acme(id), map[string]any{"approve": true}); r.Status != http.StatusConflict {
		t.Errorf("deciding a rejected approval: %d %s", r.Status, r.Body)
	}
}

// A new message after approval_ttl: the pending call was already rejected
// as expired, and its result and count say expired, not that the user
// moved on.
func TestExpiredApprovalThenNewMessage(t *testing.T) {
	fake := fakeupstream.New(t,
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("r1", "escalate_refund", `{"orderId":"o-1"}`)}},
		fakeupstream.Reply{Text: "Something else, then."},
	)
	fake.SetStrict(true)
	tools := newToolServer(t)
	yaml := strings.Replace(gatedYAML("memory://"), "    max_steps: 6\n", "    max_steps: 6\n    approval_ttl: 1s\n", 1)
	gw := gwtest.Start(t, yaml, map[string]string{"FAKE_URL": fake.URL, "TOOLS_URL": tools.URL})
	id := newSessionID(t)
	paused(t, gw, gwtest.User("support", "refund"), acme(id), "escalate_refund", `{"orderId":"o-1"}`)
	time.Sleep(2 * time.Second) // expiresAt is in whole seconds
	if c := completion(t, gw, gwtest.User("support", "never mind"), acme(id)); c.Text() != "Something else, then." {
		t.Fatalf("%q", c.Text())
	}
	res := toolResults(fake.Requests()[1])["r1"]
	if errorCode(t, res) != "rejected" || !strings.Contains(res, `"expired"`) || strings.Contains(res, "new message") {
		t.Errorf("result %q, want the expired rejection", res)
	}
	metrics := string(gw.Do(context.Background(), http.MethodGet, "/metrics", nil, nil).Body)
	if want := `switchboard_permission_decisions_total{decision="expired",graph="support",tool="escalate_refund"} 1`; !strings.Contains(metrics, want) {
		t.Errorf("/metrics lacks %s", want)
	}
	if strings.Contains(metrics, `decision="rejected",graph="support",tool="escalate_refund"`) {
		t.Errorf("an expired approval was counted rejected")
	}
}

// A call the approver approved still runs when the session's next request
// brings a new user message instead of resuming: only approvals still
// pending are rejected by it (CONTRACT §6). The approved call's result comes
// before the new message, and the decision is counted once, as approved. A
// call the approver rejected keeps the approver's reason.
func TestApprovedCallRunsBeforeNewMessage(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		for _, approve := range []bool{true, false} {
			name := "approved"
			if !approve {
				name = "rejected"
			}
			t.Run(name, func(t *testing.T) {
				gw, fake, tools := gatedDesk(t, storeURL, askLookup(
					fakeupstream.Reply{Text: "About your other question."},
				)...)
				id := newSessionID(t)
				a := paused(t, gw, gwtest.User("support", "why two charges?"), acme(id), "lookup_charges", `{}`)
				if r := decideOne(gw, id, a.ID, acme(id), map[string]any{"approve": approve, "reason": "too risky"}); r.Status != http.StatusOK {
					t.Fatalf("decide: %d %s", r.Status, r.Body)
				}
				c := completion(t, gw, gwtest.User("support", "and another thing"), acme(id))
				if c.Text() != "About your other question." {
					t.Fatalf("%q", c.Text())
				}
				msgs := fake.Requests()[2].Parsed.Messages
				at := map[string]int{}
				for i, m := range msgs {
					switch {
					case m.Role == "tool" && m.ToolCallID == "l1":
						at["result"] = i
					case m.Role == "user" && m.Text() == "and another thing":
						at["user"] = i
					}
				}
				if len(at) != 2 || at["result"] > at["user"] {
					t.Fatalf("the model was shown %s; want l1's result, then the new message", fake.Requests()[2].Body)
				}
				res := msgs[at["result"]].Text()
				ran := len(tools.got("/charges"))
				if approve && (ran != 1 || !strings.Contains(res, "ch_1")) {
					t.Errorf("approved: the tool ran %d times, result %q", ran, res)
				}
				if !approve && (ran != 0 || errorCode(t, res) != "rejected" || !strings.Contains(res, "too risky")) {
					t.Errorf("rejected: the tool ran %d times, result %q", ran, res)
				}
				metrics := string(gw.Do(context.Background(), http.MethodGet, "/metrics", nil, nil).Body)
				want, other := "approved", "rejected"
				if !approve {
					want, other = other, want
				}
				line := `switchboard_permission_decisions_total{decision="%s",graph="support",tool="lookup_charges"}`
				if !strings.Contains(metrics, fmt.Sprintf(line, want)+" 1") || strings.Contains(metrics, fmt.Sprintf(line, other)) {
					t.Errorf("decisions counted:\n%s", grepLines(metrics, "permission_decisions_total"))
				}
			})
		}
	})
}

// A new system or developer message is context, not the user moving on: it
// leaves pending approvals pending (CONTRACT §6: "A new user message ...
// rejects them all"), is kept in the session, and reaches the model in the
// system prompt once the approved call has run.
func TestSystemMessageKeepsApprovals(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		gw, fake, tools := gatedDesk(t, storeURL, askLookup(
			fakeupstream.Reply{Text: "Two charges."},
		)...)
		id := newSessionID(t)
		a := paused(t, gw, gwtest.User("support", "why two charges?"), acme(id), "lookup_charges", `{}`)
		sys := map[string]any{"model": "support", "messages": []any{map[string]any{"role": "system", "content": "Be brief."}}}
		if again := paused(t, gw, sys, acme(id), "lookup_charges", `{}`); again.ID != a.ID {
			t.Fatalf("the approval changed: %s, then %s", a.ID, again.ID)
		}
		if len(tools.got("/charges")) != 0 || len(fake.Requests()) != 2 {
			t.Fatalf("the run went on: %d tool calls, %d model calls", len(tools.got("/charges")), len(fake.Requests()))
		}
		if r := decideOne(gw, id, a.ID, acme(id), map[string]any{"approve": true}); r.Status != http.StatusOK {
			t.Fatalf("decide: %d %s", r.Status, r.Body)
		}
		dev := map[string]any{"model": "support", "messages": []any{map[string]any{"role": "developer", "content": "Cite the charge ids."}}}
		if c := completion(t, gw, dev, acme(id)); c.Text() != "Two charges." {
			t.Fatalf("resumed: %q", c.Text())
		}
		if n := len(tools.got("/charges")); n != 1 {
			t.Fatalf("the approved tool ran %d times, want once", n)
		}
		last := fake.Requests()[2]
		if !strings.Contains(toolResults(last)["l1"], "ch_1") {
			t.Errorf("the approved call's result: %v", toolResults(last))
		}
		system := last.Parsed.Messages[0].Text()
		if !strings.Contains(system, "Be brief.") || !strings.Contains(system, "Cite the charge ids.") {
			t.Errorf("system prompt %q lacks the client's messages", system)
		}
		for i, m := range last.Parsed.Messages[1:] {
			if m.Role == "system" || m.Role == "developer" {
				t.Errorf("message %d is a %s message after the first", i+1, m.Role)
			}
		}
	})
}

// A request refused for a tool result that answers no call changes
// nothing: its new user message does not reject the pending approval, in
// the store or in the decisions counted.
func TestRefusedRequestRejectsNothing(t *testing.T) {
	gw, _, _ := gatedDesk(t, "memory://", askLookup()...)
	id := newSessionID(t)
	a := paused(t, gw, gwtest.User("support", "why two charges?"), acme(id), "lookup_charges", `{}`)
	r := gw.Chat(map[string]any{"model": "support", "messages": []any{
		map[string]any{"role": "user", "content": "never mind"},
		map[string]any{"role": "tool", "tool_call_id": "nope", "content": "x"}}}, acme(id))
	if r.Status != http.StatusBadRequest {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	_, s := getSessionAs(t, gw, id, acme(id))
	if len(s.PendingApprovals) != 1 || s.PendingApprovals[0].ID != a.ID {
		t.Errorf("pendingApprovals %+v", s.PendingApprovals)
	}
	metrics := string(gw.Do(context.Background(), http.MethodGet, "/metrics", nil, nil).Body)
	if strings.Contains(metrics, `decision="rejected"`) {
		t.Errorf("a refused request counted a rejection:\n%s", grepLines(metrics, "permission_decisions"))
	}
}

// A decision brought in the next request's `approvals` is recorded as a
// POSTed one is, whatever becomes of the run it resumes: here the run
// trips an output guardrail, which leaves the session's transcript as it
// was, and the approval stays approved (deciding it again is 409), not
// pending again.
func TestInlineDecisionSurvivesATrip(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		fake := fakeupstream.New(t, askLookup(
			fakeupstream.Reply{Text: "Your card is 4111 1111 1111 1111."},
			fakeupstream.Reply{Text: "Still 4111 1111 1111 1111."},
			fakeupstream.Reply{Text: "Two charges of 42 USD."},
		)...)
		tools := newToolServer(t)
		gw := guardedGatedDeskWith(t, storeURL, fake, tools)
		id := newSessionID(t)
		a := paused(t, gw, gwtest.User("support", "why two charges?"), acme(id), "lookup_charges", `{}`)
		body := emptyTurn()
		body["approvals"] = []any{map[string]any{"id": a.ID, "approve": true}}
		if c := completion(t, gw, body, acme(id)); c.Choices[0].FinishReason != "content_filter" {
			t.Fatalf("the run did not trip: %+v", c)
		}
		_, s := getSessionAs(t, gw, id, acme(id))
		if len(s.PendingApprovals) != 0 {
			t.Errorf("the decision was lost: pending %+v", s.PendingApprovals)
		}
		if r := decideOne(gw, id, a.ID, acme(id), map[string]any{"approve": false}); r.Status != http.StatusConflict {
			t.Errorf("deciding it again: %d %s", r.Status, r.Body)
		}
		// The approved call ran once, and its result is kept though the
		// run tripped after it: the session's next requests, tripped or
		// not, do not run it again.
		if c := completion(t, gw, gwtest.User("support", "and now?"), acme(id)); c.Choices[0].FinishReason != "content_filter" {
			t.Fatalf("the second run did not trip: %+v", c)
		}
		if c := completion(t, gw, gwtest.User("support", "and the amount?"), acme(id)); c.Text() != "Two charges of 42 USD." {
			t.Fatalf("the third run: %q", c.Text())
		}
		if n := len(tools.got("/charges")); n != 1 {
			t.Errorf("the approved tool ran %d times, want once", n)
		}
		reqs := fake.Requests()
		if last := reqs[len(reqs)-1]; !strings.Contains(toolResults(last)["l1"], "ch_1") {
			t.Errorf("the approved call's result is not in the transcript: %v", toolResults(last))
		}
	})
}

// A turn with two calls to approve resumes once both are decided: with
// one approved and the other pending, the next request runs nothing of
// the turn, not even the approved call, and answers the pause again,
// listing the pending one (CONTRACT §6).
func TestTurnResumesOnceEveryApprovalIsDecided(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		gw, fake, tools := gatedDesk(t, storeURL,
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "transfer_to_billing", `{}`)}},
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{
				toolCall("l1", "lookup_charges", `{"month":"may"}`),
				toolCall("l2", "lookup_charges", `{"month":"june"}`),
			}},
			fakeupstream.Reply{Text: "Two charges in May, none in June."},
		)
		id := newSessionID(t)
		r := gw.Chat(gwtest.User("support", "my charges?"), acme(id))
		var p pausedReply
		r.Decode(t, &p)
		if len(p.Metadata.Approvals) != 2 {
			t.Fatalf("want two approvals: %s", r.Body)
		}
		first, second := p.Metadata.Approvals[0], p.Metadata.Approvals[1]
		if r := decideOne(gw, id, first.ID, acme(id), map[string]any{"approve": true}); r.Status != http.StatusOK {
			t.Fatalf("decide: %d %s", r.Status, r.Body)
		}
		again := paused(t, gw, emptyTurn(), acme(id), "lookup_charges", string(second.Arguments))
		if again.ID != second.ID {
			t.Errorf("the pause lists %s, want the pending %s", again.ID, second.ID)
		}
		if got := tools.got("/charges"); len(got) != 0 {
			t.Fatalf("the approved call ran while its turn waited: %v", got)
		}
		if n := len(fake.Requests()); n != 2 {
			t.Fatalf("%d provider calls, want 2", n)
		}
		_, s := getSessionAs(t, gw, id, acme(id))
		if len(s.PendingApprovals) != 1 || s.PendingApprovals[0].ID != second.ID {
			t.Errorf("pendingApprovals %+v", s.PendingApprovals)
		}
		body := emptyTurn()
		body["approvals"] = []any{map[string]any{"id": second.ID, "approve": false, "reason": "not June"}}
		if c := completion(t, gw, body, acme(id)); c.Text() != "Two charges in May, none in June." {
			t.Fatalf("resumed: %q", c.Text())
		}
		if got := tools.got("/charges"); len(got) != 1 || !strings.Contains(got[0], "may") {
			t.Errorf("tool calls %v, want the approved one once", got)
		}
		reqs := fake.Requests()
		results := toolResults(reqs[len(reqs)-1])
		if !strings.Contains(results["l1"], "ch_1") || !strings.Contains(results["l2"], "not June") {
			t.Errorf("results %v", results)
		}
	})
}

// A request refused before its run records none of its decisions, and
// can be sent again. One whose run failed after its decisions were
// recorded (a 502) has them recorded, and the approved call's result kept
// (it ran once): sending the decision again is 409, as deciding it again
// always is (CONTRACT §6), and the session's next request, with no new
// message, goes on from there.
func TestInlineDecisionAfterARefusalAndAFailure(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		gw, _, tools := gatedDesk(t, storeURL, askLookup(
			fakeupstream.Reply{Status: http.StatusBadRequest, Text: "provider refuses"},
			fakeupstream.Reply{Text: "Two charges of 42 USD."},
		)...)
		id := newSessionID(t)
		a := paused(t, gw, gwtest.User("support", "my charges?"), acme(id), "lookup_charges", `{}`)
		body := emptyTurn()
		body["approvals"] = []any{map[string]any{"id": a.ID, "approve": true}}
		refused := emptyTurn()
		refused["approvals"] = body["approvals"]
		refused["messages"] = []any{map[string]any{"role": "tool", "tool_call_id": "nope", "content": "x"}}
		if r := gw.Chat(refused, acme(id)); r.Status != http.StatusBadRequest {
			t.Fatalf("a refused request: %d %s", r.Status, r.Body)
		}
		if r := gw.Chat(body, acme(id)); r.Status != http.StatusBadGateway {
			t.Fatalf("the provider's failure: %d %s", r.Status, r.Body)
		}
		if r := gw.Chat(body, acme(id)); r.Status != http.StatusConflict {
			t.Fatalf("the same decision again: %d %s", r.Status, r.Body)
		}
		if c := completion(t, gw, emptyTurn(), acme(id)); c.Text() != "Two charges of 42 USD." {
			t.Fatalf("the next request: %q", c.Text())
		}
		if n := len(tools.got("/charges")); n != 1 {
			t.Errorf("the approved tool ran %d times, want once: the failed run's resumed turn was saved", n)
		}
	})
}

// A pause shows the client each pending call's tool and arguments, which
// the model wrote: the output guardrails check that text before the pause
// is saved, and a trip ends the run with content_filter, nothing paused.
func TestPauseTextPassesOutputGuardrails(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		fake := fakeupstream.New(t,
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "transfer_to_billing", `{}`)}},
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("l1", "lookup_charges", `{"card":"4111 1111 1111 1111"}`)}},
		)
		gw := guardedGatedDesk(t, storeURL, fake)
		id := newSessionID(t)
		r := gw.Chat(gwtest.User("support", "my charges?"), acme(id))
		if r.Status != http.StatusOK || strings.Contains(string(r.Body), "4111") || !strings.Contains(string(r.Body), `"finish_reason":"content_filter"`) {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		if resp, s := getSessionAs(t, gw, id, acme(id)); resp.Status == http.StatusOK && len(s.PendingApprovals) != 0 {
			t.Errorf("the tripped pause was saved: %+v", s.PendingApprovals)
		}
	})
}

// noCards is a guardrail that trips on a card number, to append to a
// config; the graph or agent names it in output_guardrails.
const noCards = "guardrails:\n  no_cards:\n    regex: '\\b(?:\\d[ -]?){13,16}\\b'\n    message: I can't share card numbers.\n"

// guardedGatedDesk is the gated desk whose graph has no_cards as output
// guardrail, on a store, answered by fake (strict).
func guardedGatedDesk(t *testing.T, storeURL string, fake *fakeupstream.Server) *gwtest.Gateway {
	t.Helper()
	return guardedGatedDeskWith(t, storeURL, fake, newToolServer(t))
}

// guardedGatedDeskWith is guardedGatedDesk calling tools.
func guardedGatedDeskWith(t *testing.T, storeURL string, fake *fakeupstream.Server, tools *toolServer) *gwtest.Gateway {
	t.Helper()
	fake.SetStrict(true)
	yaml := strings.Replace(gatedYAML(storeURL), "    permissions:\n      - {tool: escalate_refund, action: ask}\n",
		"    output_guardrails: [no_cards]\n    permissions:\n      - {tool: escalate_refund, action: ask}\n", 1) + noCards
	return gwtest.Start(t, yaml, map[string]string{"FAKE_URL": fake.URL, "TOOLS_URL": tools.URL})
}

// A new message that an input guardrail stops leaves the session as it
// was: the pending approval it would have rejected stays pending, and no
// rejection is counted or put on a span. The next message that passes
// rejects it, counted once.
func TestTrippedMessageRejectsNothing(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		fake := fakeupstream.New(t, askLookup()...)
		yaml := strings.Replace(gatedYAML(storeURL), "    permissions:\n      - {tool: escalate_refund, action: ask}\n",
			"    input_guardrails: [no_cards]\n    permissions:\n      - {tool: escalate_refund, action: ask}\n", 1) + noCards
		gw := gwtest.Start(t, yaml, map[string]string{"FAKE_URL": fake.URL, "TOOLS_URL": newToolServer(t).URL})
		id := newSessionID(t)
		a := paused(t, gw, gwtest.User("support", "why two charges?"), acme(id), "lookup_charges", `{}`)
		tripThenMoveOn(t, gw, fake, "support", acme(id), a.ID)
	})
}

// tripThenMoveOn checks, on a session of graph paused for approval
// approvalID (a call of lookup_charges), that a message an input guardrail
// (no_cards) stops leaves the approval pending and counts no rejection,
// and that the next message rejects it, counted once. fake answers
// whatever the model is asked after the pause (an input guardrail may run
// beside the model's call, whose answer it then drops).
func tripThenMoveOn(t *testing.T, gw *gwtest.Gateway, fake *fakeupstream.Server, graph string, header map[string]string, approvalID string) {
	t.Helper()
	fake.SetStrict(true)
	fake.SetFallback(func(fakeupstream.Request) fakeupstream.Reply { return fakeupstream.Reply{Text: "Fine."} })
	r := gw.Chat(gwtest.User(graph, "forget it, my card is 4111 1111 1111 1111"), header)
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"content_filter"`) {
		t.Fatalf("the tripped message: %d %s", r.Status, r.Body)
	}
	if _, s := getSessionAs(t, gw, header["X-Session-Id"], header); len(s.PendingApprovals) != 1 || s.PendingApprovals[0].ID != approvalID {
		t.Errorf("pendingApprovals %+v", s.PendingApprovals)
	}
	metrics := string(gw.Do(context.Background(), http.MethodGet, "/metrics", nil, nil).Body)
	if strings.Contains(metrics, `decision="rejected"`) {
		t.Errorf("a tripped message counted a rejection:\n%s", grepLines(metrics, "permission_decisions"))
	}
	if c := completion(t, gw, gwtest.User(graph, "never mind"), header); c.Text() != "Fine." {
		t.Fatalf("the next message: %q", c.Text())
	}
	metrics = string(gw.Do(context.Background(), http.MethodGet, "/metrics", nil, nil).Body)
	if want := `switchboard_permission_decisions_total{decision="rejected",graph="` + graph + `",tool="lookup_charges"} 1`; !strings.Contains(metrics, want) {
		t.Errorf("the rejection by a new message was not counted once:\n%s", grepLines(metrics, "permission_decisions"))
	}
}

// An approved call runs with the arguments the model wrote: ones that are
// no JSON object are shown to the approver as {} (CONTRACT §6: an
// approval's arguments are an object) but sent to the tool as written,
// as the same call without a gate would be.
func TestApprovedCallKeepsTheModelsArguments(t *testing.T) {
	gw, _, tools := gatedDesk(t, "memory://",
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "transfer_to_billing", `{}`)}},
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("l1", "lookup_charges", `[1,2]`)}},
		fakeupstream.Reply{Text: "Done."},
	)
	id := newSessionID(t)
	a := paused(t, gw, gwtest.User("support", "my charges?"), acme(id), "lookup_charges", `{}`)
	body := emptyTurn()
	body["approvals"] = []any{map[string]any{"id": a.ID, "approve": true}}
	if c := completion(t, gw, body, acme(id)); c.Text() != "Done." {
		t.Fatalf("resumed: %q", c.Text())
	}
	if got := tools.got("/charges"); len(got) != 1 || got[0] != `[1,2]` {
		t.Errorf("the tool got %q, want the model's [1,2]", got)
	}
}

// A handoff that cannot happen (arguments its schema refuses) is refused
// with invalid_args before any gate: nobody is asked to approve it.
func TestImpossibleHandoffIsNotAskedAbout(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		gw, fake, _ := gatedDesk(t, storeURL,
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("r1", "escalate_refund", `{"note":"no order"}`)}},
			fakeupstream.Reply{Text: "Which order?"},
		)
		id := newSessionID(t)
		c := completion(t, gw, gwtest.User("support", "refund me"), acme(id))
		if c.Text() != "Which order?" {
			t.Fatalf("reply %q: the impossible handoff paused the run", c.Text())
		}
		if got := errorCode(t, toolResults(fake.Requests()[1])["r1"]); got != "invalid_args" {
			t.Errorf("result %s", toolResults(fake.Requests()[1])["r1"])
		}
		if _, s := getSessionAs(t, gw, id, acme(id)); len(s.PendingApprovals) != 0 {
			t.Errorf("pending %+v", s.PendingApprovals)
		}
	})
}
