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

var weatherTool = map[string]any{"type": "function", "function": map[string]any{
	"name": "get_weather", "description": "Weather for a city",
	"parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
}}

func withTools(b map[string]any, stream bool) map[string]any {
	b["tools"] = []any{weatherTool}
	if stream {
		b["stream"] = true
	}
	return b
}

// A call to a client tool ends the run with finish_reason tool_calls; the
// client's result in the next request of the session resumes the same agent.
func TestClientToolRoundTrip(t *testing.T) {
	for _, stream := range []bool{false, true} {
		name := map[bool]string{false: "json", true: "stream"}[stream]
		t.Run(name, func(t *testing.T) {
			gw, fake := sessionDesk(t, "memory://",
				fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "transfer_to_billing", `{}`)}},
				fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("w1", "get_weather", `{"city":"Oslo"}`)}},
				fakeupstream.Reply{Text: "It is sunny in Oslo."},
			)
			id := newSessionID(t)
			r := gw.Chat(withTools(gwtest.User("support", "weather?"), stream), session(id))
			var calls []string
			var finish, agent string
			if stream {
				for _, c := range readStream(t, r) {
					for _, ch := range c.Choices {
						for _, tc := range ch.Delta.ToolCalls {
							calls = append(calls, tc.ID+":"+tc.Function.Name+":"+tc.Function.Arguments)
						}
						if ch.FinishReason != nil {
							finish, agent = *ch.FinishReason, c.Metadata["agentName"]
						}
					}
				}
			} else {
				var c gwtest.Completion
				if r.Status != http.StatusOK {
					t.Fatalf("%d %s", r.Status, r.Body)
				}
				r.Decode(t, &c)
				for _, tc := range c.Choices[0].Message.ToolCalls {
					calls = append(calls, tc.ID+":"+tc.Function.Name+":"+tc.Function.Arguments)
				}
				finish, agent = c.Choices[0].FinishReason, c.Metadata.AgentName
			}
			if diff := cmp.Diff([]string{`w1:get_weather:{"city":"Oslo"}`}, calls); diff != "" {
				t.Errorf("client tool calls (-want +got):\n%s", diff)
			}
			if finish != "tool_calls" || agent != "billing" {
				t.Errorf("finish %q agent %q", finish, agent)
			}
			if !contains(toolNames(fake.Requests()[1]), "get_weather") {
				t.Errorf("client tool not offered to billing: %v", toolNames(fake.Requests()[1]))
			}

			next := map[string]any{"model": "support", "messages": []map[string]any{
				{"role": "tool", "tool_call_id": "w1", "content": `{"sky":"sunny"}`},
			}}
			c := completion(t, gw, withTools(next, false), session(id))
			if c.Metadata.AgentName != "billing" || c.Text() != "It is sunny in Oslo." {
				t.Fatalf("resumed run: agent %q text %q", c.Metadata.AgentName, c.Text())
			}
			req := fake.Requests()[2]
			if req.Parsed.Model != "billing-model" || toolResults(req)["w1"] != `{"sky":"sunny"}` {
				t.Errorf("resumed request: model %q results %v", req.Parsed.Model, toolResults(req))
			}
			assertSystemFirst(t, fake)
		})
	}
}

// A handoff called in the same turn as a client tool waits for the client's
// result, and its result is written after it.
func TestHandoffWaitsForClientTool(t *testing.T) {
	gw, fake := sessionDesk(t, "memory://",
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{
			toolCall("w1", "get_weather", `{"city":"Oslo"}`),
			toolCall("h1", "transfer_to_billing", `{"reason":"after weather"}`),
		}},
		fakeupstream.Reply{Text: "billing, and it is sunny"},
	)
	id := newSessionID(t)
	c := completion(t, gw, withTools(gwtest.User("support", "weather then bill"), false), session(id))
	if c.Choices[0].FinishReason != "tool_calls" || c.Metadata.AgentName != "triage" || len(c.Choices[0].Message.ToolCalls) != 1 {
		t.Fatalf("first reply: %+v", c)
	}
	next := map[string]any{"model": "support", "messages": []map[string]any{
		{"role": "tool", "tool_call_id": "w1", "content": "sunny"},
	}}
	c = completion(t, gw, withTools(next, false), session(id))
	if c.Metadata.AgentName != "billing" {
		t.Fatalf("the deferred handoff did not happen: %q", c.Metadata.AgentName)
	}
	req := fake.Requests()[1]
	var order []string
	for _, m := range req.Parsed.Messages {
		if m.Role == "tool" {
			order = append(order, m.ToolCallID)
		}
	}
	if diff := cmp.Diff([]string{"w1", "h1"}, order); diff != "" {
		t.Errorf("result order (-want +got):\n%s", diff)
	}
	if toolResults(req)["h1"] != `{"assistant": "billing"}` {
		t.Errorf("handoff result %q", toolResults(req)["h1"])
	}
	assertSystemFirst(t, fake)
}

// Without a session the client sends the whole history back, as with any
// OpenAI endpoint.
func TestClientToolStateless(t *testing.T) {
	gw, fake, _ := desk(t,
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("w1", "get_weather", `{"city":"Oslo"}`)}},
		fakeupstream.Reply{Text: "sunny"},
	)
	c := completion(t, gw, withTools(gwtest.User("support", "weather?"), false), nil)
	if c.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("%+v", c)
	}
	next := withTools(map[string]any{"model": "support", "messages": []map[string]any{
		{"role": "user", "content": "weather?"},
		{"role": "assistant", "content": nil, "tool_calls": []map[string]any{{"id": "w1", "type": "function", "function": map[string]any{"name": "get_weather", "arguments": `{"city":"Oslo"}`}}}},
		{"role": "tool", "tool_call_id": "w1", "content": "sunny"},
	}}, false)
	if c := completion(t, gw, next, nil); c.Text() != "sunny" {
		t.Fatalf("%q", c.Text())
	}
	assertSystemFirst(t, fake)
}

// A request that answers some of the client's calls but not all is 400
// (OpenAI's answer too), in a session and without one, and changes
// nothing: run on, the model would read a turn cut short, and the handoff
// that waited for the client would be lost. With every result the run
// goes on, and the handoff happens.
func TestSomeClientResultsMissingIs400(t *testing.T) {
	twoCalls := fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{
		toolCall("w1", "get_weather", `{"city":"Oslo"}`),
		toolCall("w2", "get_weather", `{"city":"Rome"}`),
		toolCall("h1", "transfer_to_billing", `{"reason":"after weather"}`),
	}}
	stores(t, func(t *testing.T, storeURL string) {
		gw, fake := sessionDesk(t, storeURL, twoCalls, fakeupstream.Reply{Text: "billing: sunny and rainy"})
		id := newSessionID(t)
		if c := completion(t, gw, withTools(gwtest.User("support", "weather twice, then bill"), false), session(id)); c.Choices[0].FinishReason != "tool_calls" {
			t.Fatalf("first reply: %+v", c)
		}
		result := func(id, content string) map[string]any {
			return map[string]any{"role": "tool", "tool_call_id": id, "content": content}
		}
		one := withTools(map[string]any{"model": "support", "messages": []any{result("w1", "sunny")}}, false)
		r := gw.Chat(one, session(id))
		assertParamError(t, r, "messages")
		if !strings.Contains(string(r.Body), "w2") {
			t.Errorf("the error does not name the call without a result: %s", r.Body)
		}
		if _, s := getSession(t, gw, id, nil); s.Version != 1 || len(fake.Requests()) != 1 {
			t.Fatalf("the refused request changed the session (version %d) or reached the model", s.Version)
		}
		both := withTools(map[string]any{"model": "support", "messages": []any{result("w1", "sunny"), result("w2", "rainy")}}, false)
		if c := completion(t, gw, both, session(id)); c.Metadata.AgentName != "billing" {
			t.Fatalf("the handoff did not happen: %+v", c)
		}
	})
	t.Run("responses", func(t *testing.T) {
		gw, _ := sessionDesk(t, "memory://", twoCalls)
		r := create(t, gw, input("weather twice, then bill", "tools", []any{respWeatherTool}), nil)
		next := map[string]any{"model": "support", "previous_response_id": r.ID, "tools": []any{respWeatherTool},
			"input": []any{map[string]any{"type": "function_call_output", "call_id": "w1", "output": "sunny"}}}
		resp := gw.Do(context.Background(), http.MethodPost, "/v1/responses", next, nil)
		assertParamError(t, resp, "input")
	})
	t.Run("stateless", func(t *testing.T) {
		gw, fake, _ := desk(t, twoCalls)
		msgs := []map[string]any{
			{"role": "user", "content": "weather twice"},
			{"role": "assistant", "content": nil, "tool_calls": []map[string]any{
				{"id": "w1", "type": "function", "function": map[string]any{"name": "get_weather", "arguments": `{"city":"Oslo"}`}},
				{"id": "w2", "type": "function", "function": map[string]any{"name": "get_weather", "arguments": `{"city":"Rome"}`}},
			}},
			{"role": "tool", "tool_call_id": "w1", "content": "sunny"},
		}
		assertParamError(t, gw.Chat(withTools(map[string]any{"model": "support", "messages": msgs}, false), nil), "messages")
		if n := len(fake.Requests()); n != 0 {
			t.Errorf("the model was called %d times", n)
		}
	})
}
