package gateway_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
	"github.com/switchboard-ai/switchboard/internal/gwtest"
)

// sentChoices lists the tool_choice of every provider call the fake got,
// compacted, "" where the call had none.
func sentChoices(t *testing.T, fake *fakeupstream.Server) []string {
	t.Helper()
	var out []string
	for _, r := range fake.Requests() {
		var body struct {
			ToolChoice json.RawMessage `json:"tool_choice"`
		}
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatalf("provider request: %v", err)
		}
		out = append(out, string(body.ToolChoice))
	}
	return out
}

// named is a tool_choice naming fn, keys in OpenAI's order (a map would
// sort them), as the provider should get it.
func named(fn string) json.RawMessage {
	return json.RawMessage(`{"type": "function", "function": {"name": "` + fn + `"}}`)
}

func withChoice(b map[string]any, choice any) map[string]any {
	b["tool_choice"] = choice
	return b
}

// The run's first model call gets the client's tool_choice; the calls after
// it get "auto", so the target of a handoff is free to answer.
func TestToolChoiceFirstCallOnly(t *testing.T) {
	const allowed = `{"type":"allowed_tools","allowed_tools":{"mode":"required","tools":[{"type":"function","function":{"name":"transfer_to_billing"}}]}}`
	handoff := fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("h1", "transfer_to_billing", `{}`)}}
	for _, tc := range []struct {
		name   string
		choice any
		want   string
	}{
		{"required", "required", `"required"`},
		{"named handoff", named("transfer_to_billing"), `{"type":"function","function":{"name":"transfer_to_billing"}}`},
		{"auto", "auto", `"auto"`},
		{"allowed tools", json.RawMessage(allowed), allowed},
	} {
		for _, stream := range []bool{false, true} {
			t.Run(tc.name+map[bool]string{false: "/json", true: "/stream"}[stream], func(t *testing.T) {
				gw, fake, _ := desk(t, handoff, fakeupstream.Reply{Text: "billing here"})
				body := withChoice(gwtest.User("support", "my invoice"), tc.choice)
				if stream {
					body["stream"] = true
					readStream(t, gw.Chat(body, nil))
				} else if c := completion(t, gw, body, nil); c.Metadata.AgentName != "billing" {
					t.Fatalf("agent %q", c.Metadata.AgentName)
				}
				if diff := cmp.Diff([]string{tc.want, `"auto"`}, sentChoices(t, fake)); diff != "" {
					t.Errorf("tool_choice per call (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// Without a tool_choice no call sends one: the provider's default applies.
func TestToolChoiceAbsent(t *testing.T) {
	gw, fake, _ := desk(t,
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("h1", "transfer_to_billing", `{}`)}},
		fakeupstream.Reply{Text: "billing here"},
	)
	completion(t, gw, gwtest.User("support", "my invoice"), nil)
	if diff := cmp.Diff([]string{"", ""}, sentChoices(t, fake)); diff != "" {
		t.Errorf("tool_choice per call (-want +got):\n%s", diff)
	}
}

// "none" and a named client tool are forwarded as the client wrote them.
func TestToolChoiceNoneAndClientTool(t *testing.T) {
	gw, fake, _ := desk(t,
		fakeupstream.Reply{Text: "no tools today"},
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("w1", "get_weather", `{"city":"Oslo"}`)}},
	)
	if c := completion(t, gw, withChoice(withTools(gwtest.User("support", "hi"), false), "none"), nil); c.Text() != "no tools today" {
		t.Fatalf("%q", c.Text())
	}
	c := completion(t, gw, withChoice(withTools(gwtest.User("support", "weather?"), false), named("get_weather")), nil)
	if c.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("finish %q", c.Choices[0].FinishReason)
	}
	want := []string{`"none"`, `{"type":"function","function":{"name":"get_weather"}}`}
	if diff := cmp.Diff(want, sentChoices(t, fake)); diff != "" {
		t.Errorf("tool_choice per call (-want +got):\n%s", diff)
	}
}

// A tool_choice the active agent cannot honour is a 400 naming tool_choice,
// before any provider call and before a stream starts.
func TestToolChoiceRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		choice any
		meta   map[string]any
	}{
		{"unknown function", named("get_weather"), nil},
		{"another agent's tool", named("lookup_charges"), nil},
		{"disabled handoff", named("transfer_to_premium"), map[string]any{"plan": "free"}},
		{"unknown mode", "sometimes", nil},
		{"custom tool", map[string]any{"type": "custom", "custom": map[string]any{"name": "x"}}, nil},
		{"wrong type", 3, nil},
		{"allowed tool not offered", json.RawMessage(`{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[{"type":"function","function":{"name":"lookup_charges"}}]}}`), nil},
	} {
		for _, stream := range []bool{false, true} {
			t.Run(tc.name+map[bool]string{false: "/json", true: "/stream"}[stream], func(t *testing.T) {
				gw, fake, _ := desk(t)
				body := withChoice(gwtest.User("support", "hi"), tc.choice)
				if tc.meta != nil {
					body["metadata"] = tc.meta
				}
				body["stream"] = stream
				assertParamError(t, gw.Chat(body, nil), "tool_choice")
				if n := len(fake.Requests()); n != 0 {
					t.Errorf("%d provider calls", n)
				}
			})
		}
	}
}

// An enabled handoff is offered, so it may be named.
func TestToolChoiceEnabledHandoff(t *testing.T) {
	gw, fake, _ := desk(t, fakeupstream.Reply{Text: "triage answers"})
	body := withChoice(gwtest.User("support", "hi"), named("transfer_to_premium"))
	body["metadata"] = map[string]any{"plan": "pro"}
	completion(t, gw, body, nil)
	want := []string{`{"type":"function","function":{"name":"transfer_to_premium"}}`}
	if diff := cmp.Diff(want, sentChoices(t, fake)); diff != "" {
		t.Errorf("tool_choice per call (-want +got):\n%s", diff)
	}
}

// In a session the choice is checked against the session's active agent:
// after a handoff to billing, billing's own tool may be named and triage's
// handoffs may not; an agent with no tools cannot be required to call one.
func TestToolChoiceInSession(t *testing.T) {
	gw, fake := sessionDesk(t, "memory://",
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("h1", "transfer_to_billing", `{}`)}},
		fakeupstream.Reply{Text: "billing here"},
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("l1", "lookup_charges", `{}`)}},
		fakeupstream.Reply{Text: "two charges"},
	)
	id := newSessionID(t)
	completion(t, gw, gwtest.User("support", "my invoice"), session(id))

	assertParamError(t, gw.Chat(withChoice(gwtest.User("support", "again"), named("transfer_to_billing")), session(id)), "tool_choice")

	c := completion(t, gw, withChoice(gwtest.User("support", "list my charges"), named("lookup_charges")), session(id))
	if c.Metadata.AgentName != "billing" || c.Text() != "two charges" {
		t.Fatalf("agent %q text %q", c.Metadata.AgentName, c.Text())
	}
	want := []string{"", "", `{"type":"function","function":{"name":"lookup_charges"}}`, `"auto"`}
	if diff := cmp.Diff(want, sentChoices(t, fake)); diff != "" {
		t.Errorf("tool_choice per call (-want +got):\n%s", diff)
	}
}

// tech-support has neither tools nor handoffs: "required" cannot be met,
// and "none" is not sent (a provider refuses tool_choice without tools).
func TestToolChoiceAgentWithoutTools(t *testing.T) {
	gw, fake := sessionDesk(t, "memory://",
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("h1", "transfer_to_tech-support", `{}`)}},
		fakeupstream.Reply{Text: "tech here"},
		fakeupstream.Reply{Text: "still tech"},
	)
	id := newSessionID(t)
	completion(t, gw, gwtest.User("support", "my wifi"), session(id))
	assertParamError(t, gw.Chat(withChoice(gwtest.User("support", "again"), "required"), session(id)), "tool_choice")
	if c := completion(t, gw, withChoice(gwtest.User("support", "again"), "none"), session(id)); c.Text() != "still tech" {
		t.Fatalf("%q", c.Text())
	}
	if diff := cmp.Diff([]string{"", "", ""}, sentChoices(t, fake)); diff != "" {
		t.Errorf("tool_choice per call (-want +got):\n%s", diff)
	}
}

// assertParamError checks a 400 invalid_request that names param.
func assertParamError(t *testing.T, r *gwtest.Response, param string) {
	t.Helper()
	var e struct {
		Error struct {
			Code    string  `json:"code"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Message string  `json:"message"`
		} `json:"error"`
	}
	if r.Status != http.StatusBadRequest {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	r.Decode(t, &e)
	if e.Error.Code != "invalid_request" || e.Error.Type != "invalid_request_error" || e.Error.Param == nil || *e.Error.Param != param {
		t.Errorf("error %s", r.Body)
	}
}
