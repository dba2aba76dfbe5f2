package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
)

// Approvals through the Responses API (docs/permissions.md): a paused run
// is an incomplete response whose metadata carries the approvals as a JSON
// string, and previous_response_id continues it, with no input, once the
// approvals are decided.

var acmeAuth = map[string]string{"Authorization": "Bearer key-acme"}

// pausedResponse checks that r is the pause for one approval of tool with
// args, and returns the approval.
func pausedResponse(t *testing.T, r *respBody, tool, args string) approvalBody {
	t.Helper()
	var details struct {
		IncompleteDetails *struct {
			Reason string `json:"reason"`
		} `json:"incomplete_details"`
	}
	if err := json.Unmarshal(r.raw, &details); err != nil {
		t.Fatal(err)
	}
	if r.Status != "incomplete" || details.IncompleteDetails == nil || details.IncompleteDetails.Reason != "approval_required" {
		t.Fatalf("not a paused response: %s", r.raw)
	}
	if r.Metadata["event"] != "approval_required" || r.Metadata["sessionId"] == "" {
		t.Errorf("metadata %v", r.Metadata)
	}
	var aps []approvalBody
	if err := json.Unmarshal([]byte(r.Metadata["approvals"]), &aps); err != nil || len(aps) != 1 {
		t.Fatalf("metadata.approvals %q: %v", r.Metadata["approvals"], err)
	}
	a := aps[0]
	if !approvalID.MatchString(a.ID) || a.Tool != tool || string(a.Arguments) != args || a.Status != "pending" || a.ExpiresAt == 0 {
		t.Errorf("approval %+v", a)
	}
	if want := "Approval required: " + tool + " " + args; r.text() != want || len(r.Output) != 1 || r.Output[0].Type != "message" {
		t.Errorf("output %v text %q, want one message %q", r.items(), r.text(), want)
	}
	return a
}

// Paused, decided through the approvals endpoint, and continued from the
// paused response with no input: the same session goes on (a decision is
// no move past the response), the tool runs once.
func TestResponsesApprovalDecidedThenContinued(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		gw, fake, tools := gatedDesk(t, storeURL, askLookup(
			fakeupstream.Reply{Text: "You were charged twice."},
		)...)
		p := create(t, gw, input("why two charges?", "instructions", "Be brief."), acmeAuth)
		a := pausedResponse(t, p, "lookup_charges", `{}`)
		sess := p.Metadata["sessionId"]
		if a.Agent != "billing" || p.Metadata["agentName"] != "billing" {
			t.Errorf("agent %q, agentName %q", a.Agent, p.Metadata["agentName"])
		}
		if stored := getResp(gw, p.ID, acmeAuth); stored.Status != http.StatusOK || !strings.Contains(string(stored.Body), `"approval_required"`) {
			t.Fatalf("stored paused response: %d %s", stored.Status, stored.Body)
		}
		if r := decideOne(gw, sess, a.ID, globex(sess), map[string]any{"approve": true}); r.Status != http.StatusNotFound {
			t.Fatalf("another principal decided: %d %s", r.Status, r.Body)
		}
		globexAuth := map[string]string{"Authorization": "Bearer key-globex"}
		if r := getResp(gw, p.ID, globexAuth); r.Status != http.StatusNotFound {
			t.Errorf("another principal read the paused response: %d %s", r.Status, r.Body)
		}
		cont := map[string]any{"model": "support", "previous_response_id": p.ID, "approvals": []any{map[string]any{"id": a.ID, "approve": true}}}
		if r := gw.Do(context.Background(), http.MethodPost, "/v1/responses", cont, globexAuth); r.Status != http.StatusNotFound {
			t.Errorf("another principal continued the paused response: %d %s", r.Status, r.Body)
		}
		if r := decideOne(gw, sess, a.ID, acme(sess), map[string]any{"approve": true}); r.Status != http.StatusOK {
			t.Fatalf("decide: %d %s", r.Status, r.Body)
		}
		// The SDKs send their instructions again: with no input they are
		// no new message (which would reject the approval).
		done := create(t, gw, map[string]any{"model": "support", "previous_response_id": p.ID, "instructions": "Be brief."}, acmeAuth)
		if done.Status != "completed" || done.text() != "You were charged twice." || done.Metadata["sessionId"] != sess {
			t.Fatalf("continued: %s %q in %q (paused in %q)", done.Status, done.text(), done.Metadata["sessionId"], sess)
		}
		if _, ok := done.Metadata["approvals"]; ok {
			t.Errorf("a completed response lists approvals: %v", done.Metadata)
		}
		if n := len(tools.got("/charges")); n != 1 {
			t.Fatalf("the tool ran %d times, want 1", n)
		}
		if res := toolResults(fake.Requests()[2])["l1"]; !strings.Contains(res, "ch_1") {
			t.Errorf("tool result %q", res)
		}
		// Nothing is paused now: continuing with no input is 400.
		r := gw.Do(context.Background(), http.MethodPost, "/v1/responses", map[string]any{"model": "support", "previous_response_id": done.ID}, acmeAuth)
		if r.Status != http.StatusBadRequest {
			t.Errorf("empty input with nothing paused: %d %s", r.Status, r.Body)
		}
	})
}

// Streamed, the pause ends with response.incomplete after the approval
// message's events; the decision comes in the next request's `approvals`,
// which rejects the call, and the model reads the rejection.
func TestResponsesApprovalStreamedRejectInBody(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		gw, fake, tools := gatedDesk(t, storeURL,
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("r1", "escalate_refund", `{"orderId":"o-7"}`)}},
			fakeupstream.Reply{Text: "No refund then."},
		)
		evs, p := stream(t, gw, input("refund o-7"), acmeAuth)
		names := eventNames(evs)
		if names[len(names)-1] != "response.incomplete" || !strings.Contains(strings.Join(names, " "), "response.output_text.delta") {
			t.Fatalf("events %v", names)
		}
		a := pausedResponse(t, p, "escalate_refund", `{"orderId":"o-7"}`)
		if a.Agent != "triage" {
			t.Errorf("agent %q", a.Agent)
		}
		if stored := getResp(gw, p.ID, acmeAuth); stored.Status != http.StatusOK {
			t.Fatalf("the streamed pause was not stored: %d", stored.Status)
		}
		body := map[string]any{"model": "support", "previous_response_id": p.ID, "input": []any{},
			"approvals": []any{map[string]any{"id": a.ID, "approve": false, "reason": "not this one"}}}
		evs, done := stream(t, gw, body, acmeAuth)
		if names := eventNames(evs); names[len(names)-1] != "response.completed" || done.text() != "No refund then." || done.Metadata["agentName"] != "triage" {
			t.Fatalf("continued: %v %q by %q", names, done.text(), done.Metadata["agentName"])
		}
		res := toolResults(fake.Requests()[1])["r1"]
		if errorCode(t, res) != "rejected" || !strings.Contains(res, "not this one") {
			t.Errorf("rejected result %q", res)
		}
		if len(tools.got("/hook")) != 0 {
			t.Error("something ran")
		}
		// The decision was made: deciding it again in a body is 409.
		body["previous_response_id"] = done.ID
		if r := gw.Do(context.Background(), http.MethodPost, "/v1/responses", body, acmeAuth); r.Status != http.StatusConflict || r.ErrorCode(t) != "approval_decided" {
			t.Errorf("decided twice: %d %s", r.Status, r.Body)
		}
	})
}

// A malformed decision in a Responses body is 400 before anything runs.
func TestResponsesApprovalMalformed(t *testing.T) {
	gw, fake, _ := gatedDesk(t, "memory://")
	for _, ap := range []any{map[string]any{"id": "apr_1"}, map[string]any{"approve": true}, map[string]any{"id": "apr_1", "approve": "yes"}} {
		body := input("x", "approvals", []any{ap})
		if r := gw.Do(context.Background(), http.MethodPost, "/v1/responses", body, acmeAuth); r.Status != http.StatusBadRequest {
			t.Errorf("%v: %d %s", ap, r.Status, r.Body)
		}
	}
	if n := len(fake.Requests()); n != 0 {
		t.Errorf("%d upstream calls", n)
	}
}

// store: false has no session to pause in, even when it continues a stored
// response (its run goes on in a copy forgotten afterwards): ask is denied.
func TestResponsesApprovalNotStoredDenied(t *testing.T) {
	gw, fake, tools := gatedDesk(t, "memory://",
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "transfer_to_billing", `{}`)}},
		fakeupstream.Reply{Text: "Billing here."},
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("l1", "lookup_charges", `{}`)}},
		fakeupstream.Reply{Text: "I cannot look."},
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c2", "transfer_to_billing", `{}`)}},
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("l2", "lookup_charges", `{}`)}},
		fakeupstream.Reply{Text: "Nor now."},
	)
	first := create(t, gw, input("hi"), acmeAuth)
	r := create(t, gw, input("charges?", "previous_response_id", first.ID, "store", false), acmeAuth)
	if r.Status != "completed" || r.text() != "I cannot look." {
		t.Fatalf("%s %q", r.Status, r.text())
	}
	if res := toolResults(fake.Requests()[3])["l1"]; errorCode(t, res) != "denied" || !strings.Contains(res, "approval requires a session") {
		t.Errorf("result %q", res)
	}
	r = create(t, gw, input("charges?", "store", false), acmeAuth)
	if r.text() != "Nor now." || !strings.Contains(toolResults(fake.Requests()[6])["l2"], "approval requires a session") {
		t.Errorf("stateless: %q %v", r.text(), toolResults(fake.Requests()[6]))
	}
	if len(tools.got("/charges")) != 0 {
		t.Error("the tool ran")
	}
}

// A turn with a client tool and a tool behind ask: function_call items and
// the approvals in metadata, incomplete; the run goes on once the
// function_call_output and the decision are in.
func TestResponsesApprovalWithClientTool(t *testing.T) {
	gw, fake, tools := gatedDesk(t, "memory://",
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "transfer_to_billing", `{}`)}},
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("l1", "lookup_charges", `{}`), toolCall("w1", "get_weather", `{"city":"Oslo"}`)}},
		fakeupstream.Reply{Text: "Sunny, two charges."},
	)
	fn := []any{map[string]any{"type": "function", "name": "get_weather", "parameters": map[string]any{"type": "object"}}}
	p := create(t, gw, input("weather and charges?", "tools", fn), acmeAuth)
	if p.Status != "incomplete" || len(p.items()) != 1 || p.items()[0] != `function_call:w1:get_weather:{"city":"Oslo"}` {
		t.Fatalf("%s %v", p.Status, p.items())
	}
	var aps []approvalBody
	if err := json.Unmarshal([]byte(p.Metadata["approvals"]), &aps); err != nil || len(aps) != 1 || aps[0].Tool != "lookup_charges" {
		t.Fatalf("approvals %q", p.Metadata["approvals"])
	}
	out := []any{map[string]any{"type": "function_call_output", "call_id": "w1", "output": "sunny"}}
	again := create(t, gw, map[string]any{"model": "support", "previous_response_id": p.ID, "input": out, "tools": fn}, acmeAuth)
	if again.Status != "incomplete" || again.text() != "Approval required: lookup_charges {}" || len(fake.Requests()) != 2 {
		t.Fatalf("the result without the decision: %s %q", again.Status, again.text())
	}
	done := create(t, gw, map[string]any{"model": "support", "previous_response_id": again.ID, "tools": fn,
		"approvals": []any{map[string]any{"id": aps[0].ID, "approve": true}}}, acmeAuth)
	if done.Status != "completed" || done.text() != "Sunny, two charges." || len(tools.got("/charges")) != 1 {
		t.Fatalf("%s %q", done.Status, done.text())
	}
	if got := toolResults(fake.Requests()[2]); got["w1"] != "sunny" || !strings.Contains(got["l1"], "ch_1") {
		t.Errorf("results %v", got)
	}
}
