package gateway_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
	"github.com/switchboard-ai/switchboard/internal/gwtest"
)

// filterYAML gives triage one handoff per input filter; vip is only for the
// principal acme.
const filterYAML = `
server:
  api_keys:
    - {name: acme, key: key-acme}
    - {name: globex, key: key-globex}
providers:
  fake: {base_url: "${FAKE_URL}"}
agents:
  triage:
    description: Routes
    instructions: You are triage.
    model: fake/triage
    handoffs:
      - {agent: last, input_filter: last_user_message}
      - {agent: nested, input_filter: nest_history}
      - agent: short
        input_filter: [remove_tool_calls, {keep_last: 2}]
      - {agent: empty, input_filter: {keep_last: 1}}
      - {agent: vip, enabled_when: {principal: acme}}
  last: {description: Sees the last user message, instructions: You are last., model: fake/last}
  nested: {description: Sees a history block, instructions: You are nested., model: fake/nested}
  short: {description: Sees two messages, instructions: You are short., model: fake/short}
  empty: {description: Sees nothing, instructions: You are empty., model: fake/empty}
  vip: {description: Only for acme, instructions: You are vip., model: fake/vip}
graphs:
  filters: {lead: triage}
`

// history is a conversation with tool traffic, then the new user turn.
func history() map[string]any {
	return map[string]any{"model": "filters", "messages": []map[string]any{
		{"role": "user", "content": "first question"},
		{"role": "assistant", "content": "checking", "tool_calls": []map[string]any{{"id": "x1", "type": "function", "function": map[string]any{"name": "lookup", "arguments": "{}"}}}},
		{"role": "tool", "tool_call_id": "x1", "content": "42"},
		{"role": "assistant", "content": "it is 42"},
		{"role": "user", "content": "second question"},
	}}
}

// seen lists role:text of what a target got after its system prompt.
func seen(r fakeupstream.Request) []string {
	var out []string
	for _, m := range r.Parsed.Messages[1:] {
		out = append(out, m.Role+":"+m.Text())
	}
	return out
}

func TestInputFiltersThroughHTTP(t *testing.T) {
	key := map[string]string{"Authorization": "Bearer key-acme"}
	tests := []struct {
		target string
		want   []string
	}{
		{"last", []string{"user:second question"}},
		{"short", []string{"assistant:it is 42", "user:second question"}},
	}
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			fake := fakeupstream.New(t,
				fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("h", "transfer_to_"+tt.target, `{"reason":"r"}`)}},
				fakeupstream.Reply{Text: "ok"},
			)
			fake.SetStrict(true)
			gw := gwtest.Start(t, filterYAML, map[string]string{"FAKE_URL": fake.URL})
			if c := completion(t, gw, history(), key); c.Metadata.AgentName != tt.target {
				t.Fatalf("agent %q", c.Metadata.AgentName)
			}
			req := fake.Requests()[1]
			if diff := cmp.Diff(tt.want, seen(req)); diff != "" {
				t.Errorf("%s saw (-want +got):\n%s", tt.target, diff)
			}
			wantSys := "You are " + tt.target + ".\n\n[routing note - not from the user] handoff triage -> " + tt.target + `: reason="r"`
			if got := systemPrompt(t, req); got != wantSys {
				t.Errorf("system prompt %q", got)
			}
		})
	}

	t.Run("nest_history", func(t *testing.T) {
		fake := fakeupstream.New(t,
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("h", "transfer_to_nested", `{}`)}},
			fakeupstream.Reply{Text: "ok"},
		)
		gw := gwtest.Start(t, filterYAML, map[string]string{"FAKE_URL": fake.URL})
		completion(t, gw, history(), key)
		got := seen(fake.Requests()[1])
		if len(got) != 1 || !strings.HasPrefix(got[0], "assistant:") {
			t.Fatalf("nested saw %q", got)
		}
		for _, want := range []string{"<CONVERSATION HISTORY>", "user: first question", "(result of x1): 42", "user: second question", "transfer_to_nested", "</CONVERSATION HISTORY>"} {
			if !strings.Contains(got[0], want) {
				t.Errorf("history block lacks %q:\n%s", want, got[0])
			}
		}
	})

	t.Run("a filter that keeps nothing", func(t *testing.T) {
		fake := fakeupstream.New(t, fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("h", "transfer_to_empty", `{}`)}})
		gw := gwtest.Start(t, filterYAML, map[string]string{"FAKE_URL": fake.URL})
		headers := map[string]string{"Authorization": "Bearer key-acme", "X-Session-Id": "empty-filter"}
		r := gw.Chat(history(), headers)
		if r.Status != http.StatusInternalServerError || r.ErrorCode(t) != "graph_error" {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		if len(fake.Requests()) != 1 {
			t.Errorf("the target was called with an empty transcript")
		}
		// Nothing of the failed run was stored.
		if g := gw.Do(context.Background(), http.MethodGet, "/v1/sessions/empty-filter", nil, headers); g.Status != http.StatusNotFound {
			t.Errorf("session after graph_error: %d %s", g.Status, g.Body)
		}
	})
}

// enabled_when: {principal: acme} offers the handoff to acme's key only.
func TestEnabledWhenPrincipal(t *testing.T) {
	fake := fakeupstream.New(t, fakeupstream.Reply{Text: "a"}, fakeupstream.Reply{Text: "b"})
	gw := gwtest.Start(t, filterYAML, map[string]string{"FAKE_URL": fake.URL})
	completion(t, gw, gwtest.User("filters", "x"), map[string]string{"Authorization": "Bearer key-acme"})
	completion(t, gw, gwtest.User("filters", "x"), map[string]string{"Authorization": "Bearer key-globex"})
	reqs := fake.Requests()
	if !contains(toolNames(reqs[0]), "transfer_to_vip") || contains(toolNames(reqs[1]), "transfer_to_vip") {
		t.Errorf("acme offered %v; globex offered %v", toolNames(reqs[0]), toolNames(reqs[1]))
	}
}

func TestHandoffMetrics(t *testing.T) {
	gw, _, _ := desk(t,
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "transfer_to_billing", `{}`), toolCall("c2", "transfer_to_tech-support", `{}`)}},
		fakeupstream.Reply{Text: "ok"},
	)
	completion(t, gw, gwtest.User("support", "x"), nil)
	body := string(gw.Do(context.Background(), http.MethodGet, "/metrics", nil, nil).Body)
	for _, want := range []string{
		`switchboard_handoffs_total{from="triage",graph="support",outcome="accepted",to="billing"} 1`,
		`switchboard_handoffs_total{from="triage",graph="support",outcome="extra_in_turn",to="tech-support"} 1`,
		`switchboard_requests_total{code="",graph="support",status="200"} 1`,
		`switchboard_tokens_total{model="billing-model",provider="fake",type="output"} 5`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
