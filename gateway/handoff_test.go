package gateway_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
	"github.com/switchboard-ai/switchboard/internal/gwtest"
)

// A triage -> billing handoff, then billing's own tool, as the upstream
// sees it and as the client sees it.
func TestHandoffToBilling(t *testing.T) {
	gw, fake, tools := desk(t,
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("call_1", "transfer_to_billing", `{"reason":"duplicate charge"}`)}},
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("call_2", "lookup_charges", `{}`)}},
		fakeupstream.Reply{Text: "You were charged twice; I have refunded one."},
	)
	c := completion(t, gw, gwtest.User("support", "I was charged twice"), nil)
	if c.Metadata.AgentName != "billing" || c.Text() != "You were charged twice; I have refunded one." {
		t.Fatalf("reply: agent %q text %q", c.Metadata.AgentName, c.Text())
	}
	if c.Model != "support" || c.Choices[0].FinishReason != "stop" {
		t.Errorf("model %q finish %q", c.Model, c.Choices[0].FinishReason)
	}
	if c.Usage.TotalTokens != 45 || c.Usage.PromptTokens != 30 {
		t.Errorf("usage not summed over 3 calls: %+v", c.Usage)
	}
	reqs := fake.Requests()
	if len(reqs) != 3 {
		t.Fatalf("upstream got %d requests, want 3", len(reqs))
	}
	// triage: its instructions, its handoffs; premium is disabled.
	if got := systemPrompt(t, reqs[0]); got != "You are the triage desk." {
		t.Errorf("triage system prompt %q", got)
	}
	if diff := cmp.Diff([]string{"transfer_to_billing", "transfer_to_tech-support", "escalate_refund"}, toolNames(reqs[0])); diff != "" {
		t.Errorf("triage tools (-want +got):\n%s", diff)
	}
	if reqs[0].Parsed.Model != "triage-model" {
		t.Errorf("triage model %q", reqs[0].Parsed.Model)
	}
	// The handoff tool carries the default schema and the target's description.
	for _, tl := range reqs[0].Parsed.Tools {
		if tl.Function.Name == "transfer_to_billing" {
			if tl.Function.Description != "Answers questions about charges and invoices" {
				t.Errorf("handoff description %q", tl.Function.Description)
			}
			var schema map[string]any
			_ = json.Unmarshal(tl.Function.Parameters, &schema)
			if _, ok := schema["properties"].(map[string]any)["reason"]; !ok {
				t.Errorf("default schema lacks reason: %s", tl.Function.Parameters)
			}
		}
	}
	// billing: its own instructions then the routing note; only its tools.
	wantNote := `[routing note - not from the user] handoff triage -> billing: reason="duplicate charge"`
	if got := systemPrompt(t, reqs[1]); got != "You are the billing desk.\n\n"+wantNote {
		t.Errorf("billing system prompt %q", got)
	}
	if diff := cmp.Diff([]string{"lookup_charges", "broken_tool", "transfer_to_triage"}, toolNames(reqs[1])); diff != "" {
		t.Errorf("billing tools (-want +got):\n%s", diff)
	}
	if reqs[1].Parsed.Model != "billing-model" {
		t.Errorf("billing model %q", reqs[1].Parsed.Model)
	}
	if got := toolResults(reqs[1])["call_1"]; got != `{"assistant": "billing"}` {
		t.Errorf("handoff tool result %q", got)
	}
	// The server tool ran with the call's arguments and its body went back.
	if got := tools.got("/charges"); len(got) != 1 || got[0] != "{}" {
		t.Errorf("charges tool calls %q", got)
	}
	if got := toolResults(reqs[2])["call_2"]; !strings.Contains(got, "ch_1") {
		t.Errorf("tool result %q", got)
	}
	assertSystemFirst(t, fake)
}

// docs/handoffs.md: one handoff per turn, ordinary tools of the turn still run,
// the accepted handoff's result after the others.
func TestOneHandoffPerTurn(t *testing.T) {
	gw, fake, _ := desk(t,
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{
			toolCall("c1", "transfer_to_billing", `{}`),
			toolCall("c2", "transfer_to_tech-support", `{}`),
			toolCall("c3", "no_such_tool", `{}`),
		}},
		fakeupstream.Reply{Text: "billing here"},
	)
	c := completion(t, gw, gwtest.User("support", "help"), nil)
	if c.Metadata.AgentName != "billing" {
		t.Fatalf("agent %q", c.Metadata.AgentName)
	}
	req := fake.Requests()[1]
	var order []string
	for _, m := range req.Parsed.Messages {
		if m.Role == "tool" {
			order = append(order, m.ToolCallID)
		}
	}
	if diff := cmp.Diff([]string{"c2", "c3", "c1"}, order); diff != "" {
		t.Errorf("tool result order (-want +got):\n%s", diff)
	}
	res := toolResults(req)
	if got := errorCode(t, res["c2"]); got != "extra_in_turn" {
		t.Errorf("second handoff: %s", res["c2"])
	}
	if got := errorCode(t, res["c3"]); got != "unknown_tool" {
		t.Errorf("unknown tool: %s", res["c3"])
	}
	assertSystemFirst(t, fake)
}

func TestRefusedHandoffs(t *testing.T) {
	tests := []struct {
		name     string
		call     fakeupstream.ToolCall
		metadata map[string]any
		wantCode string
	}{
		{name: "arguments not matching the schema", call: toolCall("c1", "escalate_refund", `{"note":"no order id"}`), wantCode: "invalid_args"},
		{name: "arguments that are not JSON", call: toolCall("c1", "transfer_to_billing", `{"reason":`), wantCode: "invalid_args"},
		{name: "a handoff enabled_when disables", call: toolCall("c1", "transfer_to_premium", `{}`), metadata: map[string]any{"plan": "free"}, wantCode: "denied"},
		{name: "a name never offered", call: toolCall("c1", "transfer_to_refunds", `{}`), wantCode: "unknown_tool"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gw, fake, _ := desk(t,
				fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{tt.call}},
				fakeupstream.Reply{Text: "triage answers itself"},
			)
			body := gwtest.User("support", "help")
			if tt.metadata != nil {
				body["metadata"] = tt.metadata
			}
			c := completion(t, gw, body, nil)
			if c.Metadata.AgentName != "triage" {
				t.Errorf("agent %q, want triage (no handoff)", c.Metadata.AgentName)
			}
			reqs := fake.Requests()
			if got := errorCode(t, toolResults(reqs[1])["c1"]); got != tt.wantCode {
				t.Errorf("code %q, want %q", got, tt.wantCode)
			}
			if got := systemPrompt(t, reqs[1]); got != "You are the triage desk." {
				t.Errorf("no routing note expected, system prompt %q", got)
			}
		})
	}
}

// max_handoffs spans agents: the third handoff of a run is refused and the
// agent answers itself; a cycle triage <-> billing is legal.
func TestMaxHandoffsAcrossAgents(t *testing.T) {
	gw, fake, _ := desk(t,
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "transfer_to_billing", `{}`)}},
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c2", "transfer_to_triage", `{}`)}},
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c3", "transfer_to_billing", `{}`)}},
		fakeupstream.Reply{Text: "triage again"},
	)
	c := completion(t, gw, gwtest.User("support", "ping pong"), nil)
	if c.Metadata.AgentName != "triage" || c.Text() != "triage again" {
		t.Fatalf("agent %q text %q", c.Metadata.AgentName, c.Text())
	}
	reqs := fake.Requests()
	if got := errorCode(t, toolResults(reqs[3])["c3"]); got != "limit_exceeded" {
		t.Errorf("third handoff: %q", toolResults(reqs[3])["c3"])
	}
	// Routing notes accumulate, in order, in the leading system prompt.
	want := "You are the triage desk.\n\n[routing note - not from the user] handoff triage -> billing\n\n[routing note - not from the user] handoff billing -> triage"
	if got := systemPrompt(t, reqs[2]); got != want {
		t.Errorf("system prompt after the cycle:\n%q\nwant\n%q", got, want)
	}
	assertSystemFirst(t, fake)
}

func TestMaxStepsExceeded(t *testing.T) {
	var replies []fakeupstream.Reply
	for i := 0; i < 6; i++ {
		replies = append(replies, fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c", "no_such_tool", `{}`)}})
	}
	gw, fake, _ := desk(t, replies...)
	resp := gw.Chat(gwtest.User("support", "loop"), nil)
	if resp.Status != http.StatusUnprocessableEntity || resp.ErrorCode(t) != "max_steps_exceeded" {
		t.Fatalf("status %d: %s", resp.Status, resp.Body)
	}
	if n := len(fake.Requests()); n != 6 {
		t.Errorf("upstream got %d calls, want max_steps = 6", n)
	}
}

// A server tool that fails is reported to the model as tool_failed and the
// model recovers.
func TestToolFailed(t *testing.T) {
	gw, fake, _ := desk(t,
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "transfer_to_billing", `{}`)}},
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c2", "broken_tool", `{}`)}},
		fakeupstream.Reply{Text: "sorry, the tool is down"},
	)
	c := completion(t, gw, gwtest.User("support", "bill"), nil)
	if c.Text() != "sorry, the tool is down" {
		t.Fatalf("text %q", c.Text())
	}
	if got := errorCode(t, toolResults(fake.Requests()[2])["c2"]); got != "tool_failed" {
		t.Errorf("code %q", got)
	}
}

// A server tool called with arguments that are not JSON gets invalid_args
// (docs/handoffs.md), not tool_failed, and is not called; empty arguments
// are {}.
func TestToolArgumentsNotJSON(t *testing.T) {
	for _, tc := range []struct {
		args, code string
		called     int
	}{
		{`{"city": `, "invalid_args", 0},
		{`city=Oslo`, "invalid_args", 0},
		{``, "", 1},
	} {
		t.Run(tc.args, func(t *testing.T) {
			gw, fake, tools := desk(t,
				fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "transfer_to_billing", `{}`)}},
				fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c2", "lookup_charges", tc.args)}},
				fakeupstream.Reply{Text: "done"},
			)
			completion(t, gw, gwtest.User("support", "bill"), nil)
			result := toolResults(fake.Requests()[2])["c2"]
			if tc.code == "" {
				if !strings.Contains(result, "ch_1") {
					t.Errorf("result %q", result)
				}
			} else if got := errorCode(t, result); got != tc.code {
				t.Errorf("result %q: code %q, want %q", result, got, tc.code)
			}
			if n := len(tools.got("/charges")); n != tc.called {
				t.Errorf("the tool was called %d times, want %d", n, tc.called)
			}
		})
	}
}

// An input filter shapes what the target sees; the routing note lists the
// validated arguments in schema order.
func TestInputFilterAndArgumentOrder(t *testing.T) {
	gw, fake, _ := desk(t,
		fakeupstream.Reply{Text: "Which order?", ToolCalls: []fakeupstream.ToolCall{toolCall("c0", "transfer_to_tech-support", `{}`), toolCall("c00", "transfer_to_billing", `{}`)}},
		fakeupstream.Reply{Text: "tech here"},
	)
	completion(t, gw, gwtest.User("support", "first"), nil)

	fake.Push(
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "escalate_refund", `{"note":"urgent","orderId":"A-42"}`)}},
		fakeupstream.Reply{Text: "refund confirmed"},
	)
	body := map[string]any{"model": "support", "messages": []map[string]any{
		{"role": "user", "content": "I want my money back"},
		{"role": "assistant", "content": "Looking", "tool_calls": []map[string]any{{"id": "x1", "type": "function", "function": map[string]any{"name": "lookup", "arguments": "{}"}}}},
		{"role": "tool", "tool_call_id": "x1", "content": "{}"},
		{"role": "user", "content": "order A-42 please"},
	}}
	c := completion(t, gw, body, nil)
	if c.Metadata.AgentName != "refunds" {
		t.Fatalf("agent %q", c.Metadata.AgentName)
	}
	req := fake.Requests()[3]
	if got := systemPrompt(t, req); got != `You are the refunds desk.`+"\n\n"+`[routing note - not from the user] handoff triage -> refunds: orderId="A-42", note="urgent"` {
		t.Errorf("refunds system prompt %q", got)
	}
	for _, m := range req.Parsed.Messages {
		if m.Role == "tool" || len(m.ToolCalls) > 0 {
			t.Errorf("remove_tool_calls left %s message %+v", m.Role, m)
		}
	}
	var texts []string
	for _, m := range req.Parsed.Messages[1:] {
		texts = append(texts, m.Role+":"+m.Text())
	}
	if diff := cmp.Diff([]string{"user:I want my money back", "assistant:Looking", "user:order A-42 please"}, texts); diff != "" {
		t.Errorf("refunds history (-want +got):\n%s", diff)
	}
	assertSystemFirst(t, fake)
}

// enabled_when on request metadata: the premium handoff is offered to pro
// customers only, and its on_handoff hook gets {from, to, args, sessionId}.
func TestEnabledWhenAndHook(t *testing.T) {
	gw, fake, tools := desk(t,
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "transfer_to_premium", `{"reason":"vip"}`)}},
		fakeupstream.Reply{Text: "premium desk"},
	)
	body := gwtest.User("support", "hello")
	body["metadata"] = map[string]any{"plan": "pro"}
	c := completion(t, gw, body, map[string]string{"X-Session-Id": "hook-session"})
	if c.Metadata.AgentName != "premium" {
		t.Fatalf("agent %q", c.Metadata.AgentName)
	}
	if !contains(toolNames(fake.Requests()[0]), "transfer_to_premium") {
		t.Errorf("premium not offered to a pro customer: %v", toolNames(fake.Requests()[0]))
	}
	hooks := tools.got("/hook")
	if len(hooks) != 1 {
		t.Fatalf("hook called %d times", len(hooks))
	}
	var payload map[string]any
	if err := json.Unmarshal([]byte(hooks[0]), &payload); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"from": "triage", "to": "premium", "args": map[string]any{"reason": "vip"}, "sessionId": "hook-session"}
	if diff := cmp.Diff(want, payload); diff != "" {
		t.Errorf("hook payload (-want +got):\n%s", diff)
	}
}

// invalid_args says what is wrong in words a model and a person can read.
func TestInvalidArgsMessage(t *testing.T) {
	gw, fake, _ := desk(t,
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "escalate_refund", `{"orderId": 42}`)}},
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c2", "escalate_refund", `{}`)}},
		fakeupstream.Reply{Text: "which order?"},
	)
	completion(t, gw, gwtest.User("support", "refund"), nil)
	reqs := fake.Requests()
	for id, want := range map[string]string{"c1": "got number, want string", "c2": "missing property 'orderId'"} {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		res := toolResults(reqs[2])[id]
		if err := json.Unmarshal([]byte(res), &e); err != nil || e.Error.Code != "invalid_args" || !strings.Contains(e.Error.Message, want) {
			t.Errorf("%s: result %s, want invalid_args saying %q", id, res, want)
		}
	}
}

// A failing on_handoff hook is logged and traced, never fatal: the
// handoff goes on.
func TestFailingHookIsNotFatal(t *testing.T) {
	fake := fakeupstream.New(t,
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "transfer_to_premium", `{}`)}},
		fakeupstream.Reply{Text: "premium desk"},
	)
	tools := newToolServer(t)
	yaml := strings.Replace(deskYAML, `${TOOLS_URL}/hook`, `${TOOLS_URL}/broken-hook`, 1)
	gw := gwtest.Start(t, yaml, map[string]string{"FAKE_URL": fake.URL, "TOOLS_URL": tools.URL})
	body := gwtest.User("support", "hello")
	body["metadata"] = map[string]any{"plan": "pro"}
	if c := completion(t, gw, body, nil); c.Metadata.AgentName != "premium" || c.Text() != "premium desk" {
		t.Fatalf("agent %q text %q", c.Metadata.AgentName, c.Text())
	}
	if got := tools.got("/broken-hook"); len(got) != 1 {
		t.Errorf("hook called %d times", len(got))
	}
}
