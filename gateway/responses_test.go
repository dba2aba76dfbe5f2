package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
	"github.com/switchboard-ai/switchboard/internal/gwtest"
)

// The Responses API through the real HTTP API. gwtest judges every reply
// and stream event by OpenAI's and the Open Responses published schemas
// (internal/openapicheck); Switchboard's own switchboard:* items and events
// are in neither, and are checked here by hand.

// respBody is the part of a response the tests read.
type respBody struct {
	ID                 string  `json:"id"`
	Object             string  `json:"object"`
	Status             string  `json:"status"`
	Model              string  `json:"model"`
	PreviousResponseID *string `json:"previous_response_id"`
	Output             []struct {
		Type      string `json:"type"`
		ID        string `json:"id"`
		Status    string `json:"status"`
		Role      string `json:"role"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
		From      string `json:"from"`
		To        string `json:"to"`
		Content   []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	} `json:"output"`
	Usage struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
	Metadata map[string]string `json:"metadata"`
	raw      []byte
}

// text joins the output messages' texts.
func (r *respBody) text() string {
	var b strings.Builder
	for _, it := range r.Output {
		for _, c := range it.Content {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

// items lists the output items as "type" or "type:detail".
func (r *respBody) items() []string {
	var out []string
	for _, it := range r.Output {
		switch it.Type {
		case "function_call":
			out = append(out, it.Type+":"+it.CallID+":"+it.Name+":"+it.Arguments)
		case "switchboard:handoff":
			out = append(out, it.Type+":"+it.From+"->"+it.To)
		default:
			out = append(out, it.Type)
		}
	}
	return out
}

// create posts a non-streamed request and decodes a 200, validated.
func create(t *testing.T, gw *gwtest.Gateway, body map[string]any, header map[string]string) *respBody {
	t.Helper()
	r := gw.Do(context.Background(), http.MethodPost, "/v1/responses", body, header)
	if r.Status != http.StatusOK {
		t.Fatalf("POST /v1/responses: %d %s", r.Status, r.Body)
	}
	var out respBody
	r.Decode(t, &out)
	out.raw = r.Body
	return &out
}

// sseEvent is one event of a Responses stream.
type sseEvent struct {
	name string
	data []byte
}

// stream posts a streamed request and returns its events, validated, and
// the response the last one carries.
func stream(t *testing.T, gw *gwtest.Gateway, body map[string]any, header map[string]string) ([]sseEvent, *respBody) {
	t.Helper()
	body["stream"] = true
	r := gw.Do(context.Background(), http.MethodPost, "/v1/responses", body, header)
	if r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("stream: %d %s %s", r.Status, r.Header.Get("Content-Type"), r.Body)
	}
	return streamEvents(t, r.Body)
}

// streamEvents reads a Responses stream's body: its events and the
// response the last one carries.
func streamEvents(t *testing.T, body []byte) ([]sseEvent, *respBody) {
	t.Helper()
	// The terminal event is the literal [DONE] (Open Responses).
	if !bytes.HasSuffix(body, []byte("\n\ndata: [DONE]\n\n")) {
		t.Errorf("the stream does not end with [DONE]: %q", body[max(0, len(body)-80):])
	}
	var evs []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data = []byte(strings.TrimPrefix(line, "data: "))
		case line == "" && cur.name != "":
			evs = append(evs, cur)
			cur = sseEvent{}
		}
	}
	if len(evs) == 0 {
		t.Fatalf("no events in %s", body)
	}
	var last struct {
		Response json.RawMessage `json:"response"`
	}
	if err := json.Unmarshal(evs[len(evs)-1].data, &last); err != nil || last.Response == nil {
		t.Fatalf("last event %s carries no response", evs[len(evs)-1].name)
	}
	var out respBody
	if err := json.Unmarshal(last.Response, &out); err != nil {
		t.Fatal(err)
	}
	out.raw = last.Response
	return evs, &out
}

func eventNames(evs []sseEvent) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.name)
	}
	return out
}

// input is a one-message request for the support graph.
func input(text string, extra ...any) map[string]any {
	b := map[string]any{"model": "support", "input": text}
	for i := 0; i+1 < len(extra); i += 2 {
		b[extra[i].(string)] = extra[i+1]
	}
	return b
}

// upstreamTexts lists the user and assistant texts an upstream request
// carried.
func upstreamTexts(r fakeupstream.Request) []string {
	var out []string
	for _, m := range r.Parsed.Messages {
		if m.Role == "user" || m.Role == "assistant" {
			if t := m.Text(); t != "" {
				out = append(out, m.Role+":"+t)
			}
		}
	}
	return out
}

func getResp(gw *gwtest.Gateway, id string, header map[string]string) *gwtest.Response {
	return gw.Do(context.Background(), http.MethodGet, "/v1/responses/"+id, nil, header)
}

// A stream carries the standard event sequence; the response it completes
// with is the stored one.
func TestResponsesStream(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		gw, _ := sessionDesk(t, storeURL,
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "transfer_to_billing", `{}`)}},
			fakeupstream.Reply{Text: "Billing here, streaming."},
		)
		evs, r := stream(t, gw, input("charged twice"), nil)
		names := eventNames(evs)
		want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"}
		if !cmp.Equal(names[:4], want) || names[len(names)-1] != "response.completed" {
			t.Fatalf("events: %v", names)
		}
		for _, n := range names {
			if strings.HasPrefix(n, "switchboard:") {
				t.Errorf("a %s event without include", n)
			}
		}
		if r.text() != "Billing here, streaming." || r.Metadata["agentName"] != "billing" || r.Status != "completed" {
			t.Fatalf("completed response: %s", r.raw)
		}
		got := getResp(gw, r.ID, nil)
		if got.Status != http.StatusOK {
			t.Fatalf("GET: %d %s", got.Status, got.Body)
		}
		var stored respBody
		got.Decode(t, &stored)
		if stored.text() != r.text() || stored.ID != r.ID || !cmp.Equal(stored.Metadata, r.Metadata) {
			t.Errorf("stored %s\nstreamed %s", got.Body, r.raw)
		}
	})
}

// Handoffs are output items and switchboard:handoff events only when the
// request includes switchboard:handoffs.
func TestResponsesHandoffsOptIn(t *testing.T) {
	handoff := fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "transfer_to_billing", `{}`)}}
	gw, fake := sessionDesk(t, "memory://", handoff, fakeupstream.Reply{Text: "a"}, handoff, fakeupstream.Reply{Text: "b"},
		handoff, fakeupstream.Reply{Text: "a"}, handoff, fakeupstream.Reply{Text: "d"})
	inc := []string{"switchboard:handoffs"}

	if r := create(t, gw, input("x"), nil); !cmp.Equal(r.items(), []string{"message"}) {
		t.Errorf("without include: %v", r.items())
	}
	if r := create(t, gw, input("x", "include", inc), nil); !cmp.Equal(r.items(), []string{"switchboard:handoff:triage->billing", "message"}) {
		t.Errorf("with include: %v", r.items())
	}
	evs, r := stream(t, gw, input("x", "include", inc), nil)
	var handoffs []string
	for _, ev := range evs {
		if ev.name == "switchboard:handoff" {
			var h struct{ From, To, ToolCallID string }
			_ = json.Unmarshal(ev.data, &h)
			handoffs = append(handoffs, h.From+"->"+h.To+":"+h.ToolCallID)
		}
	}
	if !cmp.Equal(handoffs, []string{"triage->billing:c1"}) || !cmp.Equal(r.items(), []string{"switchboard:handoff:triage->billing", "message"}) {
		t.Errorf("stream with include: events %v, output %v", handoffs, r.items())
	}
	// A client that sends the output back as input, as agent SDKs do,
	// may send the handoff items too: they are records, not input, and
	// decide nothing (a stateless request starts at the lead).
	var output []any
	if err := json.Unmarshal(r.raw, &struct {
		Output *[]any `json:"output"`
	}{&output}); err != nil {
		t.Fatal(err)
	}
	replay := append([]any{map[string]any{"role": "user", "content": "x"}}, output...)
	replay = append(replay, map[string]any{"role": "user", "content": "and then?"})
	next := create(t, gw, map[string]any{"model": "support", "input": replay, "store": false, "include": inc}, nil)
	if !cmp.Equal(next.items(), []string{"switchboard:handoff:triage->billing", "message"}) {
		t.Errorf("the output sent back as input: %v", next.items())
	}
	got := upstreamTexts(fake.Requests()[len(fake.Requests())-2])
	if want := []string{"user:x", "assistant:a", "user:and then?"}; !cmp.Equal(got, want) {
		t.Errorf("the lead was sent %v, want %v", got, want)
	}
}

var respWeatherTool = map[string]any{"type": "function", "name": "get_weather", "description": "Weather for a city",
	"parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}, "strict": false}

// A client tool call is a function_call item; its function_call_output in
// the next request resumes the same agent.
func TestResponsesClientTools(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		for _, streamed := range []bool{false, true} {
			gw, fake := sessionDesk(t, storeURL,
				fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "transfer_to_billing", `{}`)}},
				fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("w1", "get_weather", `{"city":"Oslo"}`)}},
				fakeupstream.Reply{Text: "Sunny in Oslo."},
			)
			body := input("weather?", "tools", []any{respWeatherTool})
			var r *respBody
			if streamed {
				_, r = stream(t, gw, body, nil)
			} else {
				r = create(t, gw, body, nil)
			}
			if !cmp.Equal(r.items(), []string{`function_call:w1:get_weather:{"city":"Oslo"}`}) || r.Metadata["agentName"] != "billing" {
				t.Fatalf("stream %v: %v %v", streamed, r.items(), r.Metadata)
			}
			next := map[string]any{"model": "support", "previous_response_id": r.ID, "tools": []any{respWeatherTool},
				"input": []any{map[string]any{"type": "function_call_output", "call_id": "w1", "output": `{"sky":"sunny"}`}}}
			r2 := create(t, gw, next, nil)
			if r2.text() != "Sunny in Oslo." || r2.Metadata["agentName"] != "billing" || r2.Metadata["sessionId"] != r.Metadata["sessionId"] {
				t.Fatalf("resumed: %q %v", r2.text(), r2.Metadata)
			}
			if req := fake.Requests()[2]; req.Parsed.Model != "billing-model" || toolResults(req)["w1"] != `{"sky":"sunny"}` {
				t.Errorf("resumed upstream request: %s %v", req.Parsed.Model, toolResults(req))
			}
			assertSystemFirst(t, fake)
		}
	})
}

// A client tool's strict reaches the provider, as on chat: the reply echoes
// it, and a client that asked for strict arguments must get them.
func TestResponsesToolStrict(t *testing.T) {
	gw, fake := sessionDesk(t, "memory://", fakeupstream.Reply{Text: "ok"})
	strict := map[string]any{"type": "function", "name": "get_weather", "strict": true,
		"parameters": map[string]any{"type": "object", "properties": map[string]any{}, "required": []any{}, "additionalProperties": false}}
	create(t, gw, input("weather?", "tools", []any{strict}), nil)
	var sent struct {
		Tools []struct {
			Function struct {
				Name   string `json:"name"`
				Strict *bool  `json:"strict"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(fake.Requests()[0].Body, &sent); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, tl := range sent.Tools {
		got[tl.Function.Name] = tl.Function.Strict != nil && *tl.Function.Strict
	}
	if !got["get_weather"] {
		t.Errorf("strict did not reach the provider: %s", fake.Requests()[0].Body)
	}
}

// GET returns a stored response as it was sent; DELETE forgets it and
// leaves its session; unknown ids are 404 response_not_found.
func TestResponsesRetrieveDelete(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		gw, _ := sessionDesk(t, storeURL, fakeupstream.Reply{Text: "hello"})
		r := create(t, gw, input("hi"), nil)
		got := getResp(gw, r.ID, nil)
		if got.Status != http.StatusOK || !bytes.Equal(got.Body, r.raw) {
			t.Fatalf("GET: %d\n%s\nwant\n%s", got.Status, got.Body, r.raw)
		}
		del := gw.Do(context.Background(), http.MethodDelete, "/v1/responses/"+r.ID, nil, nil)
		if del.Status != http.StatusOK || !strings.Contains(string(del.Body), `"deleted":true`) {
			t.Fatalf("DELETE: %d %s", del.Status, del.Body)
		}
		for _, res := range []*gwtest.Response{
			getResp(gw, r.ID, nil),
			gw.Do(context.Background(), http.MethodDelete, "/v1/responses/"+r.ID, nil, nil),
			getResp(gw, "resp_0123abcd", nil),
			getResp(gw, "not-an-id", nil),
			gw.Do(context.Background(), http.MethodPost, "/v1/responses", input("again", "previous_response_id", r.ID), nil),
		} {
			if res.Status != http.StatusNotFound || res.ErrorCode(t) != "response_not_found" {
				t.Errorf("after DELETE: %d %s", res.Status, res.Body)
			}
		}
		if resp, _ := getSession(t, gw, r.Metadata["sessionId"], nil); resp.Status != http.StatusOK {
			t.Errorf("the session went with the response: %d", resp.Status)
		}
	})
}

// Errors have OpenAI's shape and the contract's codes.
func TestResponsesErrors(t *testing.T) {
	gw, fake := sessionDesk(t, "memory://")
	for _, tc := range []struct {
		body   any
		status int
		code   string
	}{
		{`{"model":"support",`, 400, "invalid_request"},
		{input("x", "model", "no-such-graph"), 404, "model_not_found"},
		{map[string]any{"model": "support"}, 400, "invalid_request"},
		{map[string]any{"model": "support", "input": []any{map[string]any{"type": "computer_call_output", "call_id": "c"}}}, 400, "invalid_request"},
		{input("x", "previous_response_id", "resp_00ff"), 404, "response_not_found"},
		{input("x", "tools", []any{map[string]any{"type": "file_search"}}), 400, "invalid_request"},
	} {
		r := gw.Do(context.Background(), http.MethodPost, "/v1/responses", tc.body, nil)
		var e struct {
			Error struct {
				Message, Type, Code string
			} `json:"error"`
		}
		r.Decode(t, &e)
		if r.Status != tc.status || e.Error.Code != tc.code || e.Error.Message == "" || e.Error.Type == "" {
			t.Errorf("%v: %d %s", tc.body, r.Status, r.Body)
		}
	}
	if n := len(fake.Requests()); n != 0 {
		t.Errorf("the upstream was called %d times for bad requests", n)
	}
	// An upstream failure before anything was said is an HTTP error, streamed or not.
	fake.Push(fakeupstream.Reply{Status: 500}, fakeupstream.Reply{Status: 500})
	for _, streamed := range []bool{false, true} {
		r := gw.Do(context.Background(), http.MethodPost, "/v1/responses", input("x", "stream", streamed), nil)
		if r.Status != http.StatusBadGateway || r.ErrorCode(t) != "upstream_error" {
			t.Errorf("stream %v: %d %s", streamed, r.Status, r.Body)
		}
	}
}

// tool_choice in the Responses shape reaches the first model call in the
// Chat Completions shape; one the agent cannot honour is 400.
func TestResponsesToolChoice(t *testing.T) {
	gw, fake := sessionDesk(t, "memory://", fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("w1", "get_weather", `{"city":"Oslo"}`)}})
	body := input("weather?", "tools", []any{respWeatherTool}, "tool_choice", map[string]any{"type": "function", "name": "get_weather"})
	r := create(t, gw, body, nil)
	var echo struct {
		ToolChoice map[string]string `json:"tool_choice"`
	}
	if err := json.Unmarshal(r.raw, &echo); err != nil || !cmp.Equal(echo.ToolChoice, map[string]string{"type": "function", "name": "get_weather"}) {
		t.Errorf("tool_choice not echoed: %s", r.raw)
	}
	got, _ := json.Marshal(fake.Requests()[0].Parsed.ToolChoice)
	if string(got) != `{"function":{"name":"get_weather"},"type":"function"}` {
		t.Errorf("upstream tool_choice %s", got)
	}
	bad := gw.Do(context.Background(), http.MethodPost, "/v1/responses",
		input("x", "tool_choice", map[string]any{"type": "function", "name": "no_such_tool"}), nil)
	if bad.Status != http.StatusBadRequest || !strings.Contains(string(bad.Body), `"param":"tool_choice"`) {
		t.Errorf("unknown tool_choice: %d %s", bad.Status, bad.Body)
	}
	// A shape of another API is refused with this API's shape shown.
	chatShaped := gw.Do(context.Background(), http.MethodPost, "/v1/responses",
		input("x", "tool_choice", map[string]any{"type": "function", "function": map[string]any{"name": "get_weather"}}), nil)
	if chatShaped.Status != http.StatusBadRequest || !strings.Contains(string(chatShaped.Body), `{\"type\": \"function\", \"name\": ...}`) {
		t.Errorf("a chat-shaped tool_choice: %d %s", chatShaped.Status, chatShaped.Body)
	}
}

// A function_call_output whose call_id answers no call of the response it
// continues is 400 (OpenAI: "No tool call found for function call output"),
// and nothing is stored: it was dropped, and the model asked again with no
// new input. The same holds for a chat request's tool message in a session.
func TestUnknownCallOutputIs400(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		gw, fake := sessionDesk(t, storeURL, fakeupstream.Reply{Text: "first"}, fakeupstream.Reply{Text: "never"})
		r := create(t, gw, input("hello"), nil)
		bad := map[string]any{"model": "support", "previous_response_id": r.ID,
			"input": []any{map[string]any{"type": "function_call_output", "call_id": "call_zzz", "output": "a"}}}
		resp := gw.Do(context.Background(), http.MethodPost, "/v1/responses", bad, nil)
		if resp.Status != http.StatusBadRequest || resp.ErrorCode(t) != "invalid_request" || !strings.Contains(string(resp.Body), `"param":"input"`) ||
			!strings.Contains(string(resp.Body), "call_zzz") {
			t.Errorf("an unknown call_id: %d %s", resp.Status, resp.Body)
		}
		sid := r.Metadata["sessionId"]
		chat := gw.Chat(map[string]any{"model": "support", "messages": []any{
			map[string]any{"role": "tool", "tool_call_id": "call_yyy", "content": "b"}}}, session(sid))
		if chat.Status != http.StatusBadRequest || !strings.Contains(string(chat.Body), `"param":"messages[0].tool_call_id"`) {
			t.Errorf("chat, an unknown tool_call_id: %d %s", chat.Status, chat.Body)
		}
		if n := len(fake.Requests()); n != 1 {
			t.Errorf("the provider was called %d times, want once", n)
		}
		_, s := getSession(t, gw, sid, nil)
		if len(s.Transcript) != 2 {
			t.Errorf("the session holds %d messages, want the first turn's 2", len(s.Transcript))
		}
	})
}

// A call the request's tool_choice does not allow is dropped, as the Open
// Responses specification asks of a server, for a provider that ignores
// tool_choice: "none" allows no call, allowed_tools only the tools it
// names. Through /v1/responses and /v1/chat/completions alike.
func TestToolChoiceIsEnforced(t *testing.T) {
	email := map[string]any{"type": "function", "name": "send_email", "parameters": map[string]any{"type": "object", "properties": map[string]any{}}}
	calls := func() fakeupstream.Reply {
		return fakeupstream.Reply{Text: "Here.", ToolCalls: []fakeupstream.ToolCall{toolCall("e1", "send_email", `{}`), toolCall("w1", "get_weather", `{"city":"Oslo"}`)}}
	}
	gw, _ := sessionDesk(t, "memory://", calls(), calls(), calls())
	allowed := input("weather?", "tools", []any{respWeatherTool, email},
		"tool_choice", map[string]any{"type": "allowed_tools", "mode": "auto", "tools": []any{map[string]any{"type": "function", "name": "get_weather"}}})
	if r := create(t, gw, allowed, nil); !cmp.Equal(r.items(), []string{"message", `function_call:w1:get_weather:{"city":"Oslo"}`}) {
		t.Errorf("allowed_tools: %v", r.items())
	}
	none := input("weather?", "tools", []any{respWeatherTool, email}, "tool_choice", "none")
	if r := create(t, gw, none, nil); !cmp.Equal(r.items(), []string{"message"}) || r.text() != "Here." || r.Status != "completed" {
		t.Errorf("none: %v %q %s", r.items(), r.text(), r.Status)
	}
	chat := gw.Chat(map[string]any{"model": "support", "messages": []any{map[string]any{"role": "user", "content": "weather?"}},
		"tools":       []any{map[string]any{"type": "function", "function": map[string]any{"name": "get_weather", "parameters": map[string]any{"type": "object"}}}},
		"tool_choice": "none"}, nil)
	var c gwtest.Completion
	chat.Decode(t, &c)
	if chat.Status != http.StatusOK || len(c.Choices) != 1 || len(c.Choices[0].Message.ToolCalls) != 0 || c.Choices[0].FinishReason != "stop" {
		t.Errorf("chat, none: %d %s", chat.Status, chat.Body)
	}
}

// A fresh response refused for such an output leaves no session behind:
// the one seeded with its history is forgotten, since the client never
// learns its id.
func TestRefusedFreshResponseLeavesNoSession(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		// A principal of this test's own: the list is the principal's,
		// whatever else shares the Redis.
		name := newSessionID(t)
		yaml := strings.Replace(deskYAML, "server:\n  listen: 127.0.0.1:0\n",
			"server:\n  listen: 127.0.0.1:0\n  api_keys: [{name: \""+name+"\", key: \"k-"+name+"\"}]\n", 1)
		gw := gwtest.Start(t, yaml+"store: {url: \""+storeURL+"\"}\n", map[string]string{"FAKE_URL": fakeupstream.New(t).URL, "TOOLS_URL": newToolServer(t).URL})
		key := map[string]string{"Authorization": "Bearer k-" + name}
		list := func() int {
			var l struct {
				Data []struct {
					ID string `json:"id"`
				} `json:"data"`
			}
			gw.Do(context.Background(), http.MethodGet, "/v1/sessions?limit=100", nil, key).Decode(t, &l)
			return len(l.Data)
		}
		if n := list(); n != 0 {
			t.Fatalf("a new principal lists %d sessions", n)
		}
		body := map[string]any{"model": "support", "input": []any{
			map[string]any{"role": "user", "content": "weather?"},
			map[string]any{"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"},
			map[string]any{"type": "function_call_output", "call_id": "c9", "output": "sunny"}}}
		if r := gw.Do(context.Background(), http.MethodPost, "/v1/responses", body, key); r.Status != http.StatusBadRequest {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		if n := list(); n != 0 {
			t.Errorf("%d sessions listed after the refused request, want none", n)
		}
	})
}
