package gateway_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
	"github.com/switchboard-ai/switchboard/internal/gwtest"
)

// chatWith is a stateless request to the desk: one user message, then
// the fields of extra as pairs (name, value).
func chatWith(extra ...any) map[string]any {
	return withFields(gwtest.User("support", "hi"), extra...)
}

// withFields sets the fields of extra, pairs (name, value), on body.
func withFields(body map[string]any, extra ...any) map[string]any {
	for i := 0; i+1 < len(extra); i += 2 {
		body[extra[i].(string)] = extra[i+1]
	}
	return body
}

// chatMessages is a stateless request to the desk with these messages.
func chatMessages(msgs ...map[string]any) map[string]any {
	return map[string]any{"model": "support", "messages": msgs}
}

func userMsg(content any) map[string]any { return map[string]any{"role": "user", "content": content} }

func fnTool(name string) map[string]any {
	return map[string]any{"type": "function", "function": map[string]any{"name": name, "parameters": map[string]any{"type": "object"}}}
}

// respTool is a Responses function tool.
func respTool(name string) map[string]any {
	return map[string]any{"type": "function", "name": name, "parameters": map[string]any{"type": "object"}}
}

// callsTool is an assistant message that only calls get_weather, as id.
func callsTool(id string) map[string]any {
	return map[string]any{"role": "assistant", "content": nil, "tool_calls": []map[string]any{
		{"id": id, "type": "function", "function": map[string]any{"name": "get_weather", "arguments": "{}"}}}}
}

func toolMsg(id string) map[string]any {
	return map[string]any{"role": "tool", "tool_call_id": id, "content": "sunny"}
}

// refusal is a request the gateway must refuse: 400 invalid_request with
// param, a message that says want.
type refusal struct {
	name  string
	body  map[string]any
	param string
	want  string
}

// assertRefusals posts each request to path (chat or responses, stateless)
// and checks its refusal; none may reach the upstream: the desk's fake is
// strict and scripted with no reply, and the refusals come before any
// model call.
func assertRefusals(t *testing.T, path string, tests []refusal) {
	t.Helper()
	gw, fake, _ := desk(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if path == "/v1/responses" {
				tt.body["store"] = false
			}
			r := gw.Do(context.Background(), http.MethodPost, path, tt.body, nil)
			assertParamError(t, r, tt.param)
			msg, _ := r.JSON(t)["error"].(map[string]any)["message"].(string)
			if !strings.Contains(msg, tt.want) {
				t.Errorf("message %q, want it to say %q", msg, tt.want)
			}
			if strings.Contains(msg, "Go ") || strings.Contains(msg, "struct") || strings.Contains(msg, "runtime.") {
				t.Errorf("the message speaks of Go types: %q", msg)
			}
		})
	}
	if n := len(fake.Requests()); n != 0 {
		t.Errorf("refused requests reached the upstream %d times", n)
	}
}

// A client tool's name that providers refuse is 400 naming it, not the
// provider's 400 answered as a 502 (which OpenAI's SDKs retry).
func TestClientToolNames(t *testing.T) {
	t.Run("chat", func(t *testing.T) {
		assertRefusals(t, "/v1/chat/completions", []refusal{
			{"a space", chatWith("tools", []any{fnTool("get weather")}), "tools[0].function.name", "^[a-zA-Z0-9_-]{1,64}$"},
			{"a dot", chatWith("tools", []any{fnTool("get_weather"), fnTool("weather.get")}), "tools[1].function.name", "must match"},
			{"over 64", chatWith("tools", []any{fnTool(strings.Repeat("x", 65))}), "tools[0].function.name", "must match"},
		})
	})
	t.Run("responses", func(t *testing.T) {
		assertRefusals(t, "/v1/responses", []refusal{
			{"a space", input("hi", "tools", []any{respTool("get weather")}), "tools[0].name", "must match"},
			{"non-ASCII", input("hi", "tools", []any{respTool("météo")}), "tools[0].name", "must match"},
		})
	})
}

// Generation parameters every provider refuses alike are refused before
// the run: a response format of no known type or a json_schema without a
// name, an n that is no integer.
func TestRequestParams(t *testing.T) {
	t.Run("chat", func(t *testing.T) {
		assertRefusals(t, "/v1/chat/completions", []refusal{
			{"response_format a string", chatWith("response_format", "json_object"), "response_format", "must be an object"},
			{"response_format of no type", chatWith("response_format", map[string]any{}), "response_format.type", "text, json_object or json_schema"},
			{"response_format of an unknown type", chatWith("response_format", map[string]any{"type": "xml"}), "response_format.type", "text, json_object or json_schema"},
			{"json_schema without json_schema", chatWith("response_format", map[string]any{"type": "json_schema"}), "response_format.json_schema.name", "is required"},
			{"json_schema without a name", chatWith("response_format", map[string]any{"type": "json_schema", "json_schema": map[string]any{"schema": map[string]any{"type": "object"}}}), "response_format.json_schema.name", "is required"},
			{"n a string", chatWith("n", "2"), "n", "n must be an integer, not a JSON string"},
			{"n a fraction", chatWith("n", 1.5), "n", "n must be an integer, not a JSON number with a fraction"},
		})
	})
	t.Run("responses", func(t *testing.T) {
		assertRefusals(t, "/v1/responses", []refusal{
			{"text.format a string", input("hi", "text", map[string]any{"format": "json"}), "text.format", "must be an object"},
			{"text.format of an unknown type", input("hi", "text", map[string]any{"format": map[string]any{"type": "xml"}}), "text.format.type", "text, json_object or json_schema"},
			{"json_schema without a name", input("hi", "text", map[string]any{"format": map[string]any{"type": "json_schema", "schema": map[string]any{"type": "object"}}}), "text.format.name", "is required"},
		})
	})
}

// Messages OpenAI refuses are refused before the run: a user message with
// no content, and a tool result that answers no call of the assistant
// message it follows, which a stateless run dropped unseen (a session
// request's was refused already).
func TestMalformedMessages(t *testing.T) {
	t.Run("chat", func(t *testing.T) {
		assertRefusals(t, "/v1/chat/completions", []refusal{
			{"user message without content", chatMessages(map[string]any{"role": "user"}), "messages[0].content", "a user message needs content"},
			{"user message with null content", chatMessages(userMsg("hi"), map[string]any{"role": "assistant", "content": "yes"}, userMsg(nil)), "messages[2].content", "a user message needs content"},
			{"user message with no parts", chatMessages(userMsg([]any{})), "messages[0].content", "a user message needs content"},
			{"tool result with no call", chatMessages(userMsg("weather?"), toolMsg("w1")), "messages[1].tool_call_id", "answers no tool call"},
			{"tool result first", chatMessages(toolMsg("w1")), "messages[0].tool_call_id", "answers no tool call"},
			{"tool result for another call", chatMessages(userMsg("weather?"), callsTool("w1"), toolMsg("w1"), toolMsg("w2")), "messages[3].tool_call_id", "answers no tool call"},
			{"tool result for an earlier turn", chatMessages(userMsg("weather?"), callsTool("w1"), toolMsg("w1"), map[string]any{"role": "assistant", "content": "Sunny."}, userMsg("and now?"), toolMsg("w1")), "messages[5].tool_call_id", "answers no tool call"},
			{"tool result after a user message", chatMessages(userMsg("weather?"), callsTool("w1"), userMsg("never mind"), toolMsg("w1")), "messages[3].tool_call_id", "answers no tool call"},
		})
	})
	t.Run("responses", func(t *testing.T) {
		call := map[string]any{"type": "function_call", "call_id": "w1", "name": "get_weather", "arguments": "{}"}
		output := func(id string) map[string]any {
			return map[string]any{"type": "function_call_output", "call_id": id, "output": "sunny"}
		}
		assertRefusals(t, "/v1/responses", []refusal{
			{"user message with no parts", input("", "input", []any{userMsg([]any{})}), "input[0].content", "a user message needs content"},
			{"output with no call", input("", "input", []any{userMsg("weather?"), output("w1")}), "input", `no function call found for the function_call_output with call_id "w1"`},
			{"output for another call", input("", "input", []any{userMsg("weather?"), call, output("w2")}), "input", `call_id "w2"`},
		})
	})
	// In a session, a user message moves on from the session's open
	// calls: a result after it answers none.
	t.Run("session", func(t *testing.T) {
		gw, fake := sessionDesk(t, "memory://", fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("w1", "get_weather", `{}`)}})
		id := newSessionID(t)
		completion(t, gw, withTools(gwtest.User("support", "weather?"), false), session(id))
		r := gw.Chat(withTools(chatMessages(userMsg("never mind"), toolMsg("w1")), false), session(id))
		assertParamError(t, r, "messages[1].tool_call_id")
		if n := len(fake.Requests()); n != 1 {
			t.Errorf("the upstream got %d calls, want the first request's only", n)
		}
	})
	// A stored response that starts a session seeds it with the input's
	// history, which no run checks: it is held to the same rule.
	t.Run("responses, stored", func(t *testing.T) {
		gw, fake := sessionDesk(t, "memory://")
		body := input("", "input", []any{userMsg("weather?"), map[string]any{"type": "function_call_output", "call_id": "w9", "output": "sunny"},
			map[string]any{"role": "assistant", "content": "Sunny."}, userMsg("thanks")})
		assertParamError(t, gw.Do(context.Background(), http.MethodPost, "/v1/responses", body, nil), "input")
		if n := len(fake.Requests()); n != 0 {
			t.Errorf("the refused request reached the upstream %d times", n)
		}
	})
}

// A field of the wrong type is named in the 400 as the client wrote it,
// never by the Go type it would have filled.
func TestWrongTypeFields(t *testing.T) {
	t.Run("chat", func(t *testing.T) {
		tools := []any{weatherTool}
		assertRefusals(t, "/v1/chat/completions", []refusal{
			{"tool_choice a number", chatWith("tools", tools, "tool_choice", 5), "tool_choice", "tool_choice must be a string or an object"},
			{"tool_choice true", chatWith("tools", tools, "tool_choice", true), "tool_choice", "tool_choice must be a string or an object"},
			{"tool_choice an array", chatWith("tools", tools, "tool_choice", []any{"auto"}), "tool_choice", "tool_choice must be a string or an object"},
			{"tool_choice naming a number", chatWith("tools", tools, "tool_choice", map[string]any{"type": "function", "function": map[string]any{"name": 5}}), "tool_choice", "tool_choice.function.name is of the wrong type (a JSON number)"},
			{"stop a number", chatWith("stop", 5), "stop", "stop must be a string or an array of strings, not a JSON number"},
			{"stop an object", chatWith("stop", map[string]any{}), "stop", "stop must be a string or an array of strings, not a JSON object"},
			{"stop holding a number", chatWith("stop", []any{"END", 5}), "stop", "stop must be a string or an array of strings, not a JSON array holding a number"},
		})
	})
	t.Run("responses", func(t *testing.T) {
		assertRefusals(t, "/v1/responses", []refusal{
			{"tool_choice a number", input("hi", "tools", []any{respWeatherTool}, "tool_choice", 5), "tool_choice", "tool_choice must be a string or an object"},
		})
	})
}

// What the request checks must not refuse: an assistant message that only
// calls tools (content null or absent) with its results, a call left
// unanswered, a session request of tool results alone, the three response
// formats, the lower bounds, any number of stop sequences.
func TestValidRequestsPass(t *testing.T) {
	gw, fake := sessionDesk(t, "memory://")
	fake.SetFallback(func(fakeupstream.Request) fakeupstream.Reply { return fakeupstream.Reply{Text: "ok"} })
	noContent := callsTool("w1")
	delete(noContent, "content")
	tests := []struct {
		name string
		body map[string]any
	}{
		{"calls with null content, answered", chatMessages(userMsg("weather?"), callsTool("w1"), toolMsg("w1"))},
		{"calls without content, answered", chatMessages(userMsg("weather?"), noContent, toolMsg("w1"))},
		{"a call left unanswered", chatMessages(userMsg("weather?"), callsTool("w1"), userMsg("never mind"))},
		{"a system message between call and result", chatMessages(userMsg("weather?"), callsTool("w1"), map[string]any{"role": "system", "content": "be brief"}, toolMsg("w1"))},
		{"user content an empty string", chatMessages(userMsg(""))},
		{"response_format text", chatWith("response_format", map[string]any{"type": "text"})},
		{"response_format json_object", chatWith("response_format", map[string]any{"type": "json_object"})},
		{"response_format json_schema", chatWith("response_format", map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "answer", "schema": map[string]any{"type": "object"}}})},
		{"response_format null", chatWith("response_format", nil)},
		{"max_tokens 0 (openai-go's generated tests send it)", chatWith("max_tokens", 0, "max_completion_tokens", 0)},
		{"max_tokens -1 (Ollama's no limit)", chatWith("max_tokens", -1)},
		{"n 2", chatWith("n", 2)},
		{"tool names of 64 and of every kind of character", chatWith("tools", []any{fnTool(strings.Repeat("x", 64)), fnTool("get-Weather_2")})},
		{"stop of many", chatWith("stop", []any{"a", "b", "c", "d", "e", "f"})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if r := gw.Chat(tt.body, nil); r.Status != http.StatusOK {
				t.Errorf("%d %s", r.Status, r.Body)
			}
		})
	}
	t.Run("tool results alone in a session", func(t *testing.T) {
		id := newSessionID(t)
		fake.Push(fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("w1", "get_weather", `{}`)}})
		completion(t, gw, withTools(gwtest.User("support", "weather?"), false), session(id))
		if r := gw.Chat(withTools(chatMessages(toolMsg("w1")), false), session(id)); r.Status != http.StatusOK {
			t.Errorf("%d %s", r.Status, r.Body)
		}
	})
	t.Run("responses", func(t *testing.T) {
		for _, body := range []map[string]any{
			input("hi", "tools", []any{respTool("get-Weather_2")}, "max_output_tokens", 1,
				"text", map[string]any{"format": map[string]any{"type": "json_schema", "name": "answer", "schema": map[string]any{"type": "object"}}}),
			input("hi", "text", map[string]any{"format": map[string]any{"type": "text"}, "verbosity": "low"}),
			input("", "store", false, "input", []any{userMsg("weather?"),
				map[string]any{"type": "function_call", "call_id": "w1", "name": "get_weather", "arguments": "{}"},
				map[string]any{"type": "function_call_output", "call_id": "w1", "output": "sunny"}}),
		} {
			if r := gw.Do(context.Background(), http.MethodPost, "/v1/responses", body, nil); r.Status != http.StatusOK {
				t.Errorf("%v: %d %s", body, r.Status, r.Body)
			}
		}
	})
	assertSystemFirst(t, fake)
}

// A client that sends a window of its history (the Agents SDK's session
// limit) may cut it between a call and its result: results that open a
// stateless request, before any user or assistant message, are let through
// (the prompt drops them), on chat and on Responses.
func TestHistoryWindowOpeningWithAResult(t *testing.T) {
	fake := fakeupstream.New(t)
	fake.SetStrict(true)
	fake.SetFallback(func(fakeupstream.Request) fakeupstream.Reply { return fakeupstream.Reply{Text: "ok"} })
	gw := gwtest.Start(t, deskYAML, map[string]string{"FAKE_URL": fake.URL, "TOOLS_URL": newToolServer(t).URL})
	window := []map[string]any{{"role": "system", "content": "Be brief."},
		{"role": "tool", "tool_call_id": "call_old", "content": `{"temp": 21}`},
		{"role": "assistant", "content": "It is 21 degrees."}, {"role": "user", "content": "and tomorrow?"}}
	if r := gw.Chat(map[string]any{"model": "support", "messages": window}, nil); r.Status != http.StatusOK {
		t.Errorf("chat: %d %s", r.Status, r.Body)
	}
	items := []any{map[string]any{"type": "function_call_output", "call_id": "call_old", "output": `{"temp": 21}`},
		map[string]any{"role": "assistant", "content": "It is 21 degrees."}, map[string]any{"role": "user", "content": "and tomorrow?"}}
	if r := gw.Do(context.Background(), http.MethodPost, "/v1/responses", map[string]any{"model": "support", "input": items}, nil); r.Status != http.StatusOK {
		t.Errorf("responses: %d %s", r.Status, r.Body)
	}
	// After a user message, a result that answers no call is still 400.
	bad := append(window, map[string]any{"role": "tool", "tool_call_id": "call_zzz", "content": "x"})
	if r := gw.Chat(map[string]any{"model": "support", "messages": bad}, nil); r.Status != http.StatusBadRequest {
		t.Errorf("a stray result after the window's start: %d %s", r.Status, r.Body)
	}
}
