package gateway

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/switchboard-ai/switchboard/runtime"
)

// responseRender turns a run's events and result into a Responses API
// response and, when streaming, into the standard event sequence:
//
//	response.created, response.in_progress,
//	per message: output_item.added, content_part.added, output_text.delta...,
//	  output_text.done, content_part.done, output_item.done
//	per client tool call: output_item.added, function_call_arguments.delta,
//	  function_call_arguments.done, output_item.done
//	response.completed (or response.incomplete, response.failed)
//
// Text an agent says before it hands off is a message item of its own, as
// the chat stream carries it under that agent's name, and so is the text of
// each model turn of a stream (what the model said before a server tool's
// call is not glued to what it says after). A reply that is not streamed
// holds the last turn's text only: the run's result carries no other. A handoff is an
// output item and a switchboard:handoff event only when the request
// includes switchboard:handoffs. The first event leaves only with the
// first thing the run has to say, so a run that fails before that is an
// ordinary HTTP error.
type responseRender struct {
	resp     *responseObject
	handoffs bool
	// send writes one event; nil renders the final response only.
	send func(typ string, event any)
	seq  int

	started bool
	msg     *messageItem // the message being streamed, nil when none
	msgAt   int          // its output index
	msgStep int          // the model call whose text it holds
	// msgText holds the open message's text; its part's Text is always
	// msgText.String(), which copies nothing. A Builder only appends, so
	// the strings it gave out stay as they were: a message of n deltas
	// costs its length, where concatenating each delta cost n² / 2 of its
	// deltas' bytes, copied and thrown away (a long answer, thousands
	// of deltas, copied hundreds of MB).
	msgText strings.Builder
	// said is whether the agent now speaking has streamed text since it
	// took the run: if not, its final text arrives whole with the result.
	said bool
	// deltas are the lengths of the text deltas sent, by output index
	// (responseRecord.Deltas); kept only when streaming.
	deltas [][]int
}

// newResponseRender starts rendering resp.
func newResponseRender(resp *responseObject, handoffs bool, send func(typ string, event any)) *responseRender {
	return &responseRender{resp: resp, handoffs: handoffs, send: send}
}

// newResponse is a response in progress for req, with nothing output yet.
func newResponse(id, model string, req *responsesRequest) *responseObject {
	r := &responseObject{
		ID:                 id,
		Object:             "response",
		CreatedAt:          time.Now().Unix(),
		Status:             "in_progress",
		Model:              model,
		PreviousResponseID: req.PreviousResponseID,
		Output:             []any{},
		Tools:              make([]responseTool, 0, len(req.Tools)),
		ToolChoice:         "auto",
		Truncation:         "disabled",
		ParallelToolCalls:  req.ParallelToolCalls == nil || *req.ParallelToolCalls,
		Temperature:        1,
		TopP:               1,
		MaxOutputTokens:    req.MaxOutputTokens,
		Store:              req.stored(),
		ServiceTier:        "default",
		Metadata:           map[string]string{},
		// OpenAI's schema does not admit a null usage, and Open
		// Responses requires one: until the run ends it is all zeros.
		Usage: &responseUsage{},
	}
	if req.Instructions != nil && *req.Instructions != "" {
		r.Instructions = req.Instructions
	}
	r.Text.Format = echoFormat(req)
	if len(req.ToolChoice) > 0 && string(req.ToolChoice) != "null" {
		r.ToolChoice = json.RawMessage(req.ToolChoice)
	}
	if req.Temperature != nil {
		r.Temperature = *req.Temperature
	}
	if req.TopP != nil {
		r.TopP = *req.TopP
	}
	for _, t := range req.Tools {
		var params any = map[string]any{}
		if len(t.Parameters) > 0 {
			params = json.RawMessage(t.Parameters)
		}
		r.Tools = append(r.Tools, responseTool{Type: "function", Name: t.Name, Description: t.Description, Parameters: params, Strict: t.Strict})
	}
	for k, v := range req.metadata() {
		r.Metadata[k] = v
	}
	return r
}

// echoFormat is the text.format a response echoes: the one passed to the
// provider as response_format (json_object, json_schema), plain text when
// none was.
func echoFormat(req *responsesRequest) any {
	text := textFormat{Type: "text"}
	if req.Text == nil {
		return text
	}
	var f struct {
		Type       string `json:"type"`
		JSONSchema struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Schema      json.RawMessage `json:"schema"`
			Strict      *bool           `json:"strict"`
		} `json:"json_schema"`
	}
	rf := responseFormat(req.Text.Format)
	if rf == nil || json.Unmarshal(rf, &f) != nil {
		return text
	}
	if f.Type != "json_schema" {
		return textFormat{Type: f.Type}
	}
	js := f.JSONSchema
	schema := js.Schema
	if len(schema) == 0 || string(schema) == "null" {
		schema = json.RawMessage("{}") // none given: the schema that admits anything
	}
	return &jsonSchemaFormat{Type: f.Type, Name: js.Name, Description: js.Description, Schema: schema, Strict: js.Strict != nil && *js.Strict}
}

// event sends one event, numbering it.
func (r *responseRender) event(typ string, ev any) {
	r.send(typ, ev)
	r.seq++
}

// begin sends response.created and response.in_progress once.
func (r *responseRender) begin() {
	if r.send == nil || r.started {
		return
	}
	r.started = true
	r.event("response.created", &responseEvent{Type: "response.created", SequenceNumber: r.seq, Response: r.resp})
	r.event("response.in_progress", &responseEvent{Type: "response.in_progress", SequenceNumber: r.seq, Response: r.resp})
}

// onEvent renders one event of the run.
func (r *responseRender) onEvent(ev runtime.Event) {
	switch ev.Kind {
	case runtime.EventAgentStart:
		r.said = false
	case runtime.EventDelta:
		if ev.Text == "" {
			return
		}
		if r.msg != nil && ev.Step != r.msgStep {
			// Another model turn speaks (the last one called a server
			// tool): its text is a message of its own.
			r.closeMessage()
		}
		r.said = true
		r.msgStep = ev.Step
		r.text(ev.Text)
	case runtime.EventHandoff:
		r.closeMessage()
		r.said = false
		if r.handoffs {
			r.handoff(ev)
		}
	}
}

// text streams a piece of the assistant's text, opening a message item
// when none is open.
func (r *responseRender) text(s string) {
	if r.msg == nil {
		r.openMessage()
	}
	r.msgText.WriteString(s)
	r.msg.Content[0].Text = r.msgText.String()
	if r.send != nil {
		r.event("response.output_text.delta", &textDeltaEvent{Type: "response.output_text.delta", SequenceNumber: r.seq,
			ItemID: r.msg.ID, OutputIndex: r.msgAt, Delta: s, Logprobs: []any{}})
		if len(r.deltas) <= r.msgAt {
			r.deltas = append(r.deltas, make([][]int, r.msgAt+1-len(r.deltas))...)
		}
		r.deltas[r.msgAt] = append(r.deltas[r.msgAt], len(s))
	}
}

// openMessage adds an in-progress message item with one empty text part.
func (r *responseRender) openMessage() { r.openMessageAs(newID("msg_")) }

// openMessageAs opens a message item of that id.
func (r *responseRender) openMessageAs(id string) {
	r.begin()
	r.msg = &messageItem{Type: "message", ID: id, Status: "in_progress", Role: "assistant", Content: []outputText{}}
	r.msgText = strings.Builder{} // the last message's text is its own
	r.msgAt = len(r.resp.Output)
	r.resp.Output = append(r.resp.Output, r.msg)
	if r.send != nil {
		added := *r.msg
		r.event("response.output_item.added", &itemEvent{Type: "response.output_item.added", SequenceNumber: r.seq, OutputIndex: r.msgAt, Item: &added})
	}
	r.msg.Content = append(r.msg.Content, newOutputText(""))
	if r.send != nil {
		r.event("response.content_part.added", &partEvent{Type: "response.content_part.added", SequenceNumber: r.seq,
			ItemID: r.msg.ID, OutputIndex: r.msgAt, Part: newOutputText("")})
	}
}

// closeMessage completes the open message item, if any.
func (r *responseRender) closeMessage() { r.closeMessageAs("completed") }

// closeMessageAs ends the open message item, if any, with status.
func (r *responseRender) closeMessageAs(status string) {
	m := r.msg
	if m == nil {
		return
	}
	r.msg = nil
	m.Status = status
	if r.send == nil {
		return
	}
	part := m.Content[0]
	r.event("response.output_text.done", &textDoneEvent{Type: "response.output_text.done", SequenceNumber: r.seq,
		ItemID: m.ID, OutputIndex: r.msgAt, Text: part.Text, Logprobs: []any{}})
	r.event("response.content_part.done", &partEvent{Type: "response.content_part.done", SequenceNumber: r.seq,
		ItemID: m.ID, OutputIndex: r.msgAt, Part: part})
	r.event("response.output_item.done", &itemEvent{Type: "response.output_item.done", SequenceNumber: r.seq, OutputIndex: r.msgAt, Item: m})
}

// handoff adds a handoff item and sends the switchboard:handoff event.
func (r *responseRender) handoff(ev runtime.Event) { r.handoffAs(newID("sbh_"), ev) }

// handoffAs adds a handoff item of that id.
func (r *responseRender) handoffAs(id string, ev runtime.Event) {
	r.begin()
	item := &handoffItem{Type: "switchboard:handoff", ID: id, Status: "completed", From: ev.From, To: ev.To, ToolCallID: ev.ToolCallID}
	at := len(r.resp.Output)
	r.resp.Output = append(r.resp.Output, item)
	if r.send == nil {
		return
	}
	r.event("switchboard:handoff", &handoffEvent{Type: "switchboard:handoff", SequenceNumber: r.seq, From: ev.From, To: ev.To, ToolCallID: ev.ToolCallID})
	r.event("response.output_item.added", &itemEvent{Type: "response.output_item.added", SequenceNumber: r.seq, OutputIndex: at, Item: item})
	r.event("response.output_item.done", &itemEvent{Type: "response.output_item.done", SequenceNumber: r.seq, OutputIndex: at, Item: item})
}

// finish renders the run's result: the last agent's text (whole, when it
// was not streamed), the client tool calls, usage and status.
func (r *responseRender) finish(res *runtime.Result, metadata map[string]string) {
	aps := pendingApprovals(res)
	paused := aps != nil && res.FinishReason != "tool_calls"
	if !r.said && res.Message.Content != "" && !paused {
		r.text(res.Message.Content)
	}
	// A message the model's token budget cut short is incomplete, like
	// the response (Open Responses: items are state machines).
	last := "completed"
	if res.FinishReason == "length" {
		last = "incomplete"
	}
	r.closeMessageAs(last)
	if paused {
		// The pause is a message item of its own, as the chat reply's
		// content: one line per approval (docs/permissions.md).
		r.text(runtime.ApprovalText(aps))
		r.closeMessage()
	}
	if res.FinishReason == "tool_calls" {
		for _, tc := range res.Message.ToolCalls {
			r.functionCall(tc)
		}
	}
	if !r.modelOutput() {
		// A run whose model said nothing still answers with a message,
		// empty: a response's output holds what the model produced.
		r.openMessage()
		r.closeMessageAs(last)
	}
	r.account(res.Usage, metadata)
	if h := res.Halt; h != nil {
		// What halted the run (a guardrail's {name, stage, reason}), as
		// the chat reply's metadata carries it; Responses metadata values
		// are strings, so each is its JSON.
		for k, v := range h.Metadata {
			if b, err := json.Marshal(v); err == nil && k != "agentName" && k != "sessionId" {
				r.resp.Metadata[k] = string(b)
			}
		}
	}
	if aps != nil {
		// Responses metadata values are strings: the approvals are one,
		// their JSON array.
		r.resp.Metadata["event"] = runtime.SuspendApproval
		r.resp.Metadata["approvals"] = approvalsJSON(aps)
	}
	switch {
	case aps != nil:
		// Paused, with or without client tool calls beside the approvals.
		r.resp.Status = "incomplete"
		r.resp.IncompleteDetails = &incompleteDetails{Reason: runtime.SuspendApproval}
	case res.FinishReason == "length":
		r.resp.Status = "incomplete"
		r.resp.IncompleteDetails = &incompleteDetails{Reason: "max_output_tokens"}
	case res.FinishReason == "content_filter":
		r.resp.Status = "incomplete"
		r.resp.IncompleteDetails = &incompleteDetails{Reason: "content_filter"}
	default:
		r.resp.Status = "completed"
		now := time.Now().Unix()
		r.resp.CompletedAt = &now
	}
}

// account sets the response's usage and adds metadata to the request's.
func (r *responseRender) account(u runtime.Usage, metadata map[string]string) {
	r.resp.Usage = &responseUsage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
	r.resp.Usage.InputTokensDetails.CachedTokens = u.CachedTokens
	r.resp.Usage.OutputTokensDetails.ReasoningTokens = u.ReasoningTokens
	for k, v := range metadata {
		r.resp.Metadata[k] = v
	}
}

// modelOutput reports whether the output holds a message or a function
// call: what the model produced, as against handoff items.
func (r *responseRender) modelOutput() bool {
	for _, it := range r.resp.Output {
		switch it.(type) {
		case *messageItem, *functionCallItem:
			return true
		}
	}
	return false
}

// complete sends the finished response, as response.completed (or
// response.incomplete). It is apart from finish so that a stored response
// is stored before the client hears of it.
func (r *responseRender) complete() {
	if r.send == nil {
		return
	}
	typ := "response.completed"
	if r.resp.Status == "incomplete" {
		typ = "response.incomplete"
	}
	r.begin()
	r.event(typ, &responseEvent{Type: typ, SequenceNumber: r.seq, Response: r.resp})
}

// functionCall adds a client tool call as a function_call item.
func (r *responseRender) functionCall(tc runtime.ToolCall) { r.functionCallAs(newID("fc_"), tc) }

// functionCallAs adds a function_call item of that id.
func (r *responseRender) functionCallAs(id string, tc runtime.ToolCall) {
	r.begin()
	item := &functionCallItem{Type: "function_call", ID: id, CallID: tc.ID, Name: tc.Function.Name, Status: "in_progress"}
	at := len(r.resp.Output)
	r.resp.Output = append(r.resp.Output, item)
	if r.send != nil {
		added := *item
		r.event("response.output_item.added", &itemEvent{Type: "response.output_item.added", SequenceNumber: r.seq, OutputIndex: at, Item: &added})
		r.event("response.function_call_arguments.delta", &argsDeltaEvent{Type: "response.function_call_arguments.delta", SequenceNumber: r.seq,
			ItemID: item.ID, OutputIndex: at, Delta: tc.Function.Arguments})
		r.event("response.function_call_arguments.done", &argsDoneEvent{Type: "response.function_call_arguments.done", SequenceNumber: r.seq,
			ItemID: item.ID, OutputIndex: at, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	item.Arguments, item.Status = tc.Function.Arguments, "completed"
	if r.send != nil {
		r.event("response.output_item.done", &itemEvent{Type: "response.output_item.done", SequenceNumber: r.seq, OutputIndex: at, Item: item})
	}
}

// fail ends a stream that has started with response.failed, after the
// open message's .done events (status incomplete: items end before their
// response, as the Open Responses event order asks), with the usage of
// the model calls that answered and metadata, as a finished response. It
// reports whether it did: before the first event the caller answers an
// HTTP error.
func (r *responseRender) fail(e *Error, usage runtime.Usage, metadata map[string]string) bool {
	if r.send == nil || !r.started {
		return false
	}
	r.closeMessageAs("incomplete")
	r.account(usage, metadata)
	r.resp.Status = "failed"
	// OpenAI's schema allows a response's error only codes of its own list:
	// Switchboard's code (docs/http-api.md) leads the message.
	r.resp.Error = &responseError{Code: "server_error", Message: e.Code + ": " + e.Message}
	r.event("response.failed", &responseEvent{Type: "response.failed", SequenceNumber: r.seq, Response: r.resp})
	return true
}
