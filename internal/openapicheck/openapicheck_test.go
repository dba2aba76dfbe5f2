package openapicheck

import (
	"strconv"
	"strings"
	"testing"
)

// The judge must fail what OpenAI's schema refuses, or it judges nothing.
func TestValidate(t *testing.T) {
	c := ForTest(t)
	if c == nil {
		t.Skip("no description to test")
	}
	const msg = `"message":{"role":"assistant","content":"hi","refusal":null}`
	tests := []struct {
		name string
		kind Kind
		body string
		ok   bool
	}{
		{"reply", ChatCompletion, `{"id":"c","object":"chat.completion","created":1,"model":"support","choices":[{"index":0,` + msg + `,"finish_reason":"stop","logprobs":null}],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3},"metadata":{"agentName":"billing","sessionId":""}}`, true},
		{"reply without refusal", ChatCompletion, `{"id":"c","object":"chat.completion","created":1,"model":"support","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop","logprobs":null}]}`, false},
		{"reply without logprobs", ChatCompletion, `{"id":"c","object":"chat.completion","created":1,"model":"support","choices":[{"index":0,` + msg + `,"finish_reason":"stop"}]}`, false},
		{"reply without index", ChatCompletion, `{"id":"c","object":"chat.completion","created":1,"model":"support","choices":[{` + msg + `,"finish_reason":"stop","logprobs":null}]}`, false},
		{"reply with an unknown finish_reason", ChatCompletion, `{"id":"c","object":"chat.completion","created":1,"model":"support","choices":[{"index":0,` + msg + `,"finish_reason":"handoff","logprobs":null}]}`, false},
		{"reply with nested metadata", ChatCompletion, `{"id":"c","object":"chat.completion","created":1,"model":"support","choices":[],"metadata":{"agent":{"name":"x"}}}`, false},
		{"chunk", ChatCompletionChunk, `{"id":"c","object":"chat.completion.chunk","created":1,"model":"support","choices":[{"index":0,"delta":{"role":"assistant","content":"hi"},"logprobs":null,"finish_reason":null}],"metadata":{"agentName":"triage","event":"handoff"}}`, true},
		{"usage chunk", ChatCompletionChunk, `{"id":"c","object":"chat.completion.chunk","created":1,"model":"support","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`, true},
		{"chunk with null usage", ChatCompletionChunk, `{"id":"c","object":"chat.completion.chunk","created":1,"model":"support","choices":[],"usage":null}`, true},
		{"chunk without finish_reason", ChatCompletionChunk, `{"id":"c","object":"chat.completion.chunk","created":1,"model":"support","choices":[{"index":0,"delta":{}}]}`, false},
		{"chunk with a bad object", ChatCompletionChunk, `{"id":"c","object":"chat.completion","created":1,"model":"support","choices":[]}`, false},
		{"error", ErrorResponse, `{"error":{"message":"m","type":"invalid_request_error","param":null,"code":"invalid_request"}}`, true},
		{"error without param", ErrorResponse, `{"error":{"message":"m","type":"invalid_request_error","code":"invalid_request"}}`, false},
		{"models", ModelList, `{"object":"list","data":[{"id":"support","object":"model","created":1,"owned_by":"switchboard","description":"desk"}]}`, true},
		{"models without owned_by", ModelList, `{"object":"list","data":[{"id":"support","object":"model","created":1}]}`, false},
		{"model", Model, `{"id":"support","object":"model","created":1,"owned_by":"switchboard"}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := c.Validate(tt.kind, []byte(tt.body))
			if (err == nil) != tt.ok {
				t.Fatalf("Validate = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestCheckReply(t *testing.T) {
	c := ForTest(t)
	if c == nil {
		t.Skip("no description to test")
	}
	chunk := `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}]}` + "\n\n"
	errEvent := `data: {"error":{"message":"m","type":"server_error","param":null,"code":"upstream_error"}}` + "\n\n"
	done := "data: [DONE]\n\n"
	tests := []struct {
		name        string
		method      string
		path        string
		status      int
		contentType string
		body        string
		checked     int
		ok          bool
	}{
		{"stream", "POST", "/v1/chat/completions", 200, "text/event-stream", chunk + chunk + done, 2, true},
		{"stream with an error event", "POST", "/v1/chat/completions", 200, "text/event-stream", chunk + errEvent + done, 2, true},
		{"stream without [DONE]", "POST", "/v1/chat/completions", 200, "text/event-stream", chunk, 1, false},
		{"stream with a bad chunk", "POST", "/v1/chat/completions", 200, "text/event-stream", `data: {"id":"c"}` + "\n\n" + done, 1, false},
		{"an error status", "GET", "/v1/sessions/x", 404, "application/json", `{"error":{"message":"m","type":"invalid_request_error","param":null,"code":"session_not_found"}}`, 1, true},
		{"an error without code", "POST", "/v1/chat/completions", 400, "application/json", `{"error":{"message":"m","type":"invalid_request_error","param":null}}`, 1, false},
		{"a session is not judged", "GET", "/v1/sessions/x", 200, "application/json", `{"id":"x"}`, 0, true},
		{"health is not judged", "GET", "/healthz", 200, "application/json", `{}`, 0, true},
		{"model", "GET", "/v1/models/support?x=1", 200, "application/json", `{"id":"support","object":"model","created":1,"owned_by":"switchboard"}`, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := c.CheckReply(tt.method, tt.path, tt.status, tt.contentType, []byte(tt.body))
			if (err == nil) != tt.ok || n != tt.checked {
				t.Fatalf("CheckReply = %d, %v; want %d, ok=%v", n, err, tt.checked, tt.ok)
			}
		})
	}
}

func TestRewriteNullable(t *testing.T) {
	got := rewriteNullable(map[string]any{
		"properties": map[string]any{
			"a": map[string]any{"type": "string", "enum": []any{"x"}, "nullable": true},
			"b": map[string]any{"$ref": "#/x", "nullable": true},
			"c": map[string]any{"type": "string", "nullable": false},
		},
	}).(map[string]any)["properties"].(map[string]any)
	a := got["a"].(map[string]any)
	if ty := a["type"].([]any); len(ty) != 2 || ty[1] != "null" {
		t.Errorf("a.type = %v", a["type"])
	}
	if e := a["enum"].([]any); len(e) != 2 || e[1] != nil {
		t.Errorf("a.enum = %v", a["enum"])
	}
	if _, ok := got["b"].(map[string]any)["anyOf"]; !ok {
		t.Errorf("b = %v, want anyOf with null", got["b"])
	}
	if _, ok := got["c"].(map[string]any)["nullable"]; ok || got["c"].(map[string]any)["type"] != "string" {
		t.Errorf("c = %v", got["c"])
	}
}

func TestSpecPathFindsTheRepositoryRoot(t *testing.T) {
	p, err := SpecPath()
	if err != nil {
		if ForTest(t) == nil {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	if !strings.HasSuffix(p, "openai-openapi.json") {
		t.Fatalf("SpecPath = %s", p)
	}
}

// Responses API replies are judged by both descriptions; switchboard:*
// items and events are left out, and a stream's events must be numbered.
func TestCheckResponses(t *testing.T) {
	c := ForTest(t)
	if c == nil {
		t.Skip("no description to test")
	}
	if c.open == nil {
		t.Fatal("the Open Responses description was not loaded")
	}
	usage := `"usage":{"input_tokens":1,"input_tokens_details":{"cached_tokens":0,"cache_write_tokens":0},"output_tokens":2,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":3}`
	resp := func(status, output string) string {
		return `{"id":"resp_1","object":"response","created_at":1,"completed_at":null,"status":"` + status + `","error":null,"incomplete_details":null,` +
			`"model":"support","previous_response_id":null,"instructions":null,"output":[` + output + `],"tools":[],"tool_choice":"auto",` +
			`"truncation":"disabled","parallel_tool_calls":true,"text":{"format":{"type":"text"}},"temperature":1,"top_p":1,"presence_penalty":0,` +
			`"frequency_penalty":0,"top_logprobs":0,"reasoning":null,` + usage + `,"max_output_tokens":null,"max_tool_calls":null,"store":true,` +
			`"background":false,"service_tier":"default","metadata":{"agentName":"billing"},"safety_identifier":null,"prompt_cache_key":null}`
	}
	msg := `{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"hi","annotations":[],"logprobs":[]}]}`
	handoff := `{"type":"switchboard:handoff","id":"sbh_1","status":"completed","from":"triage","to":"billing"}`
	ev := func(name string, seq int, rest string) string {
		return "event: " + name + "\ndata: {\"type\":\"" + name + "\",\"sequence_number\":" + strconv.Itoa(seq) + rest + "}\n\n"
	}
	created := ev("response.created", 0, `,"response":`+resp("in_progress", ""))
	done := "data: [DONE]\n\n"
	tests := []struct {
		name, method, path, contentType, body string
		checked                               int
		ok                                    bool
	}{
		{"response", "POST", "/v1/responses", "application/json", resp("completed", msg), 2, true},
		{"input items", "GET", "/v1/responses/resp_1/input_items?order=asc", "application/json",
			`{"object":"list","data":[{"type":"message","id":"msg_1","role":"user","status":"completed","content":[{"type":"input_text","text":"hi"}]}],"first_id":"msg_1","last_id":"msg_1","has_more":false}`, 1, true},
		{"a HEAD reply", "HEAD", "/v1/sessions/nope", "application/json", "", 0, true},
		{"input items without has_more", "GET", "/v1/responses/resp_1/input_items", "application/json", `{"object":"list","data":[],"first_id":"","last_id":""}`, 1, false},
		{"response with a handoff item", "GET", "/v1/responses/resp_1", "application/json", resp("completed", handoff+","+msg), 2, true},
		{"response without tools", "POST", "/v1/responses", "application/json", strings.Replace(resp("completed", msg), `"tools":[],`, "", 1), 1, false},
		{"response with a bad status", "POST", "/v1/responses", "application/json", resp("done", msg), 1, false},
		{"response paused for approvals", "POST", "/v1/responses", "application/json",
			strings.Replace(resp("incomplete", msg), `"incomplete_details":null`, `"incomplete_details":{"reason":"approval_required"}`, 1), 2, true},
		{"response incomplete for another reason", "POST", "/v1/responses", "application/json",
			strings.Replace(resp("incomplete", msg), `"incomplete_details":null`, `"incomplete_details":{"reason":"tired"}`, 1), 1, false},
		{"stream paused for approvals", "POST", "/v1/responses", "text/event-stream", created +
			ev("response.incomplete", 1, `,"response":`+strings.Replace(resp("incomplete", msg), `"incomplete_details":null`, `"incomplete_details":{"reason":"approval_required"}`, 1)) + done, 4, true},
		{"stream", "POST", "/v1/responses", "text/event-stream", created +
			ev("switchboard:handoff", 1, `,"from":"triage","to":"billing","toolCallId":"c1"`) +
			ev("response.output_item.added", 2, `,"output_index":0,"item":`+handoff) +
			ev("response.output_text.delta", 3, `,"item_id":"msg_1","output_index":1,"content_index":0,"delta":"hi","logprobs":[]`) +
			ev("response.completed", 4, `,"response":`+resp("completed", handoff+","+msg)) + done, 6, true},
		{"stream without [DONE]", "POST", "/v1/responses", "text/event-stream", created + ev("response.completed", 1, `,"response":`+resp("completed", msg)), 4, false},
		{"stream with an event after [DONE]", "POST", "/v1/responses", "text/event-stream", created + done + ev("response.completed", 1, `,"response":`+resp("completed", msg)), 2, false},
		{"stream out of sequence", "POST", "/v1/responses", "text/event-stream", created + ev("response.completed", 2, `,"response":`+resp("completed", msg)) + done, 2, false},
		{"stream with a bad event", "POST", "/v1/responses", "text/event-stream", created + ev("response.output_text.delta", 1, `,"delta":"hi"`) + done, 3, false},
		{"stream retrieved", "GET", "/v1/responses/resp_1?stream=true", "text/event-stream", created +
			ev("response.completed", 1, `,"response":`+resp("completed", msg)) + done, 4, true},
		{"stream retrieved after 3", "GET", "/v1/responses/resp_1?stream=true&starting_after=3", "text/event-stream",
			ev("response.completed", 4, `,"response":`+resp("completed", msg)) + done, 2, true},
		{"stream retrieved after 3, from 3", "GET", "/v1/responses/resp_1?stream=true&starting_after=3", "text/event-stream",
			ev("response.completed", 3, `,"response":`+resp("completed", msg)) + done, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := c.CheckReply(tt.method, tt.path, 200, tt.contentType, []byte(tt.body))
			if (err == nil) != tt.ok || n != tt.checked {
				t.Fatalf("CheckReply = %d, %v; want %d, ok=%v", n, err, tt.checked, tt.ok)
			}
		})
	}
}
