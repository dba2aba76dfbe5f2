package gateway

import (
	"encoding/json"
	goruntime "runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-ai/switchboard/internal/openapicheck"
	"github.com/switchboard-ai/switchboard/runtime"
)

// specs judges rendered responses and events by OpenAI's and the Open
// Responses descriptions, as the HTTP tests judge what they see.
type specs struct{ c *openapicheck.Checker }

func loadSpecs(t *testing.T) specs { return specs{openapicheck.ForTest(t)} }

// response judges a response.
func (s specs) response(t *testing.T, doc []byte) {
	t.Helper()
	if s.c == nil {
		return
	}
	if _, err := s.c.CheckReply("POST", "/v1/responses", 200, "application/json", doc); err != nil {
		t.Error(err)
	}
}

// stream judges a stream's events, as SSE.
func (s specs) stream(t *testing.T, evs []recorded) {
	t.Helper()
	if s.c == nil {
		return
	}
	var b []byte
	for _, e := range evs {
		b = append(append(append(append(append(b, "event: "...), e.typ...), "\ndata: "...), e.body...), "\n\n"...)
	}
	b = append(b, "data: [DONE]\n\n"...) // responsesSSE.done's, after the render's last event
	if _, err := s.c.CheckReply("POST", "/v1/responses", 200, "text/event-stream", b); err != nil {
		t.Error(err)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// recorded is one event a render sent.
type recorded struct {
	typ  string
	body []byte
}

func decodeReq(t *testing.T, body string) *responsesRequest {
	t.Helper()
	req, e := decodeResponsesRequest([]byte(body))
	if e != nil {
		t.Fatalf("decode: %v", e)
	}
	return req
}

// render runs events and a result through a render and returns the final
// response and, for a stream, the events.
func render(t *testing.T, req *responsesRequest, stream bool, events []runtime.Event, res *runtime.Result) ([]byte, []recorded) {
	t.Helper()
	var got []recorded
	var send func(string, any)
	if stream {
		send = func(typ string, ev any) { got = append(got, recorded{typ, mustJSON(t, ev)}) }
	}
	r := newResponseRender(newResponse(newID("resp_"), "support", req), req.includes(includeHandoffs), send)
	for _, ev := range events {
		r.onEvent(ev)
	}
	if res != nil {
		r.finish(res, map[string]string{"agentName": res.Agent, "sessionId": "s1"})
		r.complete()
	} else if !r.fail(&Error{Code: codeUpstreamError, Message: "the provider failed"}, runtime.Usage{}, nil) {
		return nil, got
	}
	return mustJSON(t, r.resp), got
}

var handoffRun = []runtime.Event{
	{Kind: runtime.EventAgentStart, Agent: "triage"},
	{Kind: runtime.EventDelta, Agent: "triage", Text: "Let me get "},
	{Kind: runtime.EventDelta, Agent: "triage", Text: "billing."},
	{Kind: runtime.EventHandoff, From: "triage", To: "billing", ToolCallID: "c1"},
	{Kind: runtime.EventAgentStart, Agent: "billing"},
	{Kind: runtime.EventDelta, Agent: "billing", Text: "Billing "},
	{Kind: runtime.EventDelta, Agent: "billing", Text: "here."},
}

var billingResult = &runtime.Result{
	Agent:        "billing",
	Message:      runtime.Message{Role: "assistant", Content: "Billing here."},
	FinishReason: "stop",
	Usage:        runtime.Usage{PromptTokens: 30, CompletionTokens: 7, TotalTokens: 37},
}

// outputSummary lists a response's output items as "type:text".
func outputSummary(t *testing.T, doc []byte) []string {
	t.Helper()
	var r struct {
		Output []struct {
			Type    string `json:"type"`
			Status  string `json:"status"`
			From    string `json:"from"`
			To      string `json:"to"`
			Name    string `json:"name"`
			Args    string `json:"arguments"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"output"`
	}
	if err := json.Unmarshal(doc, &r); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, it := range r.Output {
		s := it.Type + "/" + it.Status + ":"
		switch it.Type {
		case "message":
			for _, c := range it.Content {
				s += c.Text
			}
		case "function_call":
			s += it.Name + it.Args
		default:
			s += it.From + "->" + it.To
		}
		out = append(out, s)
	}
	return out
}

func types(evs []recorded) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.typ)
	}
	return out
}

func TestRenderJSON(t *testing.T) {
	sp := loadSpecs(t)
	req := decodeReq(t, `{"model":"support","input":"hi","metadata":{"plan":"pro","tier":3},"temperature":0.2,
		"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"},"strict":false}]}`)
	doc, _ := render(t, req, false, []runtime.Event{{Kind: runtime.EventAgentStart, Agent: "triage"},
		{Kind: runtime.EventHandoff, From: "triage", To: "billing", ToolCallID: "c1"}}, billingResult)
	sp.response(t, doc)
	if diff := cmp.Diff([]string{"message/completed:Billing here."}, outputSummary(t, doc)); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	var r struct {
		Status   string            `json:"status"`
		Metadata map[string]string `json:"metadata"`
		Usage    map[string]any    `json:"usage"`
		Temp     float64           `json:"temperature"`
	}
	if err := json.Unmarshal(doc, &r); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"plan": "pro", "tier": "3", "agentName": "billing", "sessionId": "s1"}
	if diff := cmp.Diff(want, r.Metadata); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}
	if r.Status != "completed" || r.Usage["total_tokens"] != 37.0 || r.Usage["input_tokens"] != 30.0 || r.Temp < 0.19 || r.Temp > 0.21 {
		t.Errorf("status %q usage %v temperature %v", r.Status, r.Usage, r.Temp)
	}
}

func TestRenderStream(t *testing.T) {
	sp := loadSpecs(t)
	for _, include := range []bool{false, true} {
		t.Run(map[bool]string{false: "standard", true: "with handoffs"}[include], func(t *testing.T) {
			body := `{"model":"support","input":"hi","stream":true}`
			if include {
				body = `{"model":"support","input":"hi","stream":true,"include":["switchboard:handoffs"]}`
			}
			doc, evs := render(t, decodeReq(t, body), true, handoffRun, billingResult)
			sp.response(t, doc)
			sp.stream(t, evs)
			for i, e := range evs {
				var ev struct {
					Type string `json:"type"`
					Seq  int    `json:"sequence_number"`
				}
				if err := json.Unmarshal(e.body, &ev); err != nil || ev.Type != e.typ || ev.Seq != i {
					t.Errorf("event %d: type %q (sent as %q), sequence_number %d", i, ev.Type, e.typ, ev.Seq)
				}
			}
			message := []string{"response.output_item.added", "response.content_part.added",
				"response.output_text.delta", "response.output_text.delta",
				"response.output_text.done", "response.content_part.done", "response.output_item.done"}
			want := append([]string{"response.created", "response.in_progress"}, message...)
			wantOut := []string{"message/completed:Let me get billing.", "message/completed:Billing here."}
			if include {
				want = append(want, "switchboard:handoff", "response.output_item.added", "response.output_item.done")
				wantOut = []string{wantOut[0], "switchboard:handoff/completed:triage->billing", wantOut[1]}
			}
			want = append(append(want, message...), "response.completed")
			if diff := cmp.Diff(want, types(evs)); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(wantOut, outputSummary(t, doc)); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
			// The completed event carries the same response.
			var last struct {
				Response json.RawMessage `json:"response"`
			}
			if err := json.Unmarshal(evs[len(evs)-1].body, &last); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(outputSummary(t, doc), outputSummary(t, last.Response)); diff != "" {
				t.Errorf("response.completed output differs from the response (-want +got):\n%s", diff)
			}
		})
	}
}

// A provider that sends the final text in one piece still gives a message
// item; a run stopped for client tools gives function_call items.
func TestRenderClientToolsAndWholeText(t *testing.T) {
	sp := loadSpecs(t)
	res := &runtime.Result{
		Agent: "triage",
		Message: runtime.Message{Role: "assistant", Content: "Checking.", ToolCalls: []runtime.ToolCall{
			{ID: "w1", Type: "function", Function: runtime.FunctionCall{Name: "get_weather", Arguments: `{"city":"Oslo"}`}},
		}},
		FinishReason: "tool_calls",
	}
	for _, stream := range []bool{false, true} {
		doc, evs := render(t, decodeReq(t, `{"model":"support","input":"weather?"}`), stream,
			[]runtime.Event{{Kind: runtime.EventAgentStart, Agent: "triage"}}, res)
		sp.response(t, doc)
		want := []string{"message/completed:Checking.", `function_call/completed:get_weather{"city":"Oslo"}`}
		if diff := cmp.Diff(want, outputSummary(t, doc)); diff != "" {
			t.Errorf("stream %v: output (-want +got):\n%s", stream, diff)
		}
		if stream {
			sp.stream(t, evs)
		}
		if stream && !strings.Contains(strings.Join(types(evs), " "), "response.function_call_arguments.done response.output_item.done response.completed") {
			t.Errorf("events: %v", types(evs))
		}
	}
}

// A run that fails after the stream started ends with response.failed; one
// that fails before it is left to an HTTP error.
func TestRenderFailure(t *testing.T) {
	sp := loadSpecs(t)
	req := decodeReq(t, `{"model":"support","input":"hi","stream":true}`)
	if doc, evs := render(t, req, true, []runtime.Event{{Kind: runtime.EventAgentStart, Agent: "triage"}}, nil); doc != nil || len(evs) != 0 {
		t.Fatalf("a run that said nothing sent %v", types(evs))
	}
	doc, evs := render(t, req, true, handoffRun[:3], nil)
	sp.response(t, doc)
	sp.stream(t, evs)
	if got := evs[len(evs)-1].typ; got != "response.failed" {
		t.Fatalf("last event %q", got)
	}
	var r struct {
		Status string         `json:"status"`
		Error  *responseError `json:"error"`
	}
	if err := json.Unmarshal(doc, &r); err != nil || r.Status != "failed" || r.Error == nil || r.Error.Code != "server_error" || !strings.HasPrefix(r.Error.Message, codeUpstreamError+": ") {
		t.Errorf("failed response: %s", doc)
	}
}

// finish_reason length is an incomplete response.
func TestRenderIncomplete(t *testing.T) {
	sp := loadSpecs(t)
	res := *billingResult
	res.FinishReason = "length"
	doc, evs := render(t, decodeReq(t, `{"model":"support","input":"hi","max_output_tokens":5}`), true, nil, &res)
	sp.response(t, doc)
	if evs[len(evs)-1].typ != "response.incomplete" || !strings.Contains(string(doc), `"incomplete_details":{"reason":"max_output_tokens"}`) {
		t.Errorf("incomplete: %v %s", types(evs), doc)
	}
	// The message the budget cut short is incomplete too, in the
	// response and in its output_item.done event.
	var r struct {
		Output []struct {
			Status string `json:"status"`
		} `json:"output"`
	}
	if err := json.Unmarshal(doc, &r); err != nil || len(r.Output) != 1 || r.Output[0].Status != "incomplete" {
		t.Errorf("cut message: %s", doc)
	}
	for _, e := range evs {
		if e.typ == "response.output_item.done" && !strings.Contains(string(e.body), `"status":"incomplete"`) {
			t.Errorf("output_item.done: %s", e.body)
		}
	}
}

// A run whose model said nothing answers with one empty message: a
// response's output holds what the model produced (Open Responses), and the
// stream opens and closes that message.
func TestRenderEmptyAnswer(t *testing.T) {
	sp := loadSpecs(t)
	res := runtime.Result{Agent: "billing", Message: runtime.Message{Role: "assistant"}, FinishReason: "stop"}
	for _, streamed := range []bool{false, true} {
		doc, evs := render(t, decodeReq(t, `{"model":"support","input":"hi"}`), streamed, nil, &res)
		sp.response(t, doc)
		if got := outputSummary(t, doc); !cmp.Equal(got, []string{"message/completed:"}) {
			t.Errorf("stream %v: output %v", streamed, got)
		}
		if !streamed {
			continue
		}
		sp.stream(t, evs)
		want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
			"response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"}
		if got := types(evs); !cmp.Equal(got, want) {
			t.Errorf("events %v", got)
		}
	}
}

// TestRenderLongStreamCostsItsLength: a streamed message's text grows by
// each delta without copying what came before. Concatenating each delta to
// the text so far allocated n² / 2 of the deltas' bytes (800 MB for these
// 4,000 deltas of 100 bytes); the message's text must cost about its
// length (2.5 MB here with each delta's event). The bound, 64 MB, is far
// from both, so that what the rest of the process allocates meanwhile
// (TotalAlloc counts it all) cannot fail the test. The text of a message
// must also not change once another one has begun.
func TestRenderLongStreamCostsItsLength(t *testing.T) {
	const n, size = 4000, 100
	delta := strings.Repeat("x", size)
	var done []string
	send := func(typ string, ev any) {
		if d, ok := ev.(*textDoneEvent); ok {
			done = append(done, d.Text)
		}
	}
	r := newResponseRender(newResponse(newID("resp_"), "support", decodeReq(t, `{"model":"support","input":"hi","stream":true}`)), false, send)
	r.onEvent(runtime.Event{Kind: runtime.EventAgentStart, Agent: "triage"})
	r.onEvent(runtime.Event{Kind: runtime.EventDelta, Agent: "triage", Text: "first", Step: 1})
	first := r.msg
	var before, after goruntime.MemStats
	goruntime.ReadMemStats(&before)
	for range n {
		r.onEvent(runtime.Event{Kind: runtime.EventDelta, Agent: "triage", Text: delta, Step: 2})
	}
	goruntime.ReadMemStats(&after)
	if got, limit := after.TotalAlloc-before.TotalAlloc, uint64(160*n*size); got > limit {
		t.Errorf("%d deltas of %d bytes allocated %d bytes; at most %d", n, size, got, limit)
	}
	r.finish(&runtime.Result{Agent: "triage", Message: runtime.Message{Role: "assistant"}, FinishReason: "stop"}, nil)
	want := strings.Repeat(delta, n)
	if len(done) != 2 || done[0] != "first" || done[1] != want {
		t.Fatalf("output_text.done: %d texts, first %q", len(done), done[0])
	}
	if first.Content[0].Text != "first" || r.resp.Output[1].(*messageItem).Content[0].Text != want {
		t.Error("the messages' texts are not what was streamed")
	}
}
