package goclient_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

func TestHandoffNonStreamed(t *testing.T) {
	f := newFake(t,
		fakeReply{ToolCalls: []fakeToolCall{{ID: "call_1", Name: "transfer_to_billing", Arguments: map[string]string{"reason": "duplicate charge"}}}},
		fakeReply{ToolCalls: []fakeToolCall{{ID: "call_2", Name: "lookup_charges", Arguments: map[string]any{}}}},
		fakeReply{Text: "You were charged twice; one charge is refunded."},
	)
	var resp *http.Response
	oa := gateway(t)
	c, err := oa.Chat.Completions.New(context.Background(), user("I was charged twice"), option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	requireFields(t, "chat.completion", c)
	if !c.JSON.ID.Valid() || !c.JSON.Created.Valid() || c.Model != "support" || c.Object != "chat.completion" {
		t.Errorf("envelope: %s", c.RawJSON())
	}
	if len(c.Choices) != 1 {
		t.Fatalf("choices: %s", c.RawJSON())
	}
	ch := c.Choices[0]
	if !ch.JSON.Index.Valid() || ch.Index != 0 || ch.FinishReason != "stop" {
		t.Errorf("choice: %s", ch.RawJSON())
	}
	// Required by the SDK and null here, as OpenAI sends them.
	if ch.Message.JSON.Refusal.Raw() != "null" || ch.JSON.Logprobs.Raw() != "null" {
		t.Errorf("refusal %q, logprobs %q; want null", ch.Message.JSON.Refusal.Raw(), ch.JSON.Logprobs.Raw())
	}
	if ch.Message.Content != "You were charged twice; one charge is refunded." || ch.Message.Role != "assistant" {
		t.Errorf("message: %s", ch.Message.RawJSON())
	}
	if c.Metadata["agentName"] != "billing" || resp.Header.Get("X-Agent-Name") != "billing" {
		t.Errorf("metadata %v, X-Agent-Name %q; want billing", c.Metadata, resp.Header.Get("X-Agent-Name"))
	}
	if !c.JSON.Usage.Valid() || c.Usage.PromptTokens != 30 || c.Usage.CompletionTokens != 15 || c.Usage.TotalTokens != 45 {
		t.Errorf("usage summed over three calls: %s", c.Usage.RawJSON())
	}
	if got := strings.Join(f.models(), ","); got != "triage-model,billing-model,billing-model" {
		t.Errorf("upstream calls: %s", got)
	}
}

// Every chunk, the handoff chunk included, is one the SDK's accumulator
// takes, and what it accumulates is the answer.
func TestHandoffStreamed(t *testing.T) {
	f := newFake(t,
		fakeReply{ToolCalls: []fakeToolCall{{ID: "call_s1", Name: "transfer_to_billing", Arguments: map[string]string{"reason": "double charge"}}}, Usage: &fakeUsage{11, 7}},
		fakeReply{StreamChunks: []string{"Your ", "refund ", "is on ", "its way."}, Usage: &fakeUsage{13, 9}},
	)
	params := user("I was charged twice")
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	oa := gateway(t)
	stream := oa.Chat.Completions.NewStreaming(context.Background(), params)
	defer stream.Close()
	var acc openai.ChatCompletionAccumulator
	var handoffs []metadata
	chunks := 0
	for stream.Next() {
		chunk := stream.Current()
		chunks++
		requireFields(t, "chunk", chunk)
		if !acc.AddChunk(chunk) {
			t.Fatalf("the accumulator refused chunk %d: %s", chunks, chunk.RawJSON())
		}
		var m metadata
		extra(t, chunk.JSON.ExtraFields, "metadata", &m)
		if m.AgentName == "" {
			t.Errorf("chunk %d names no agent: %s", chunks, chunk.RawJSON())
		}
		if m.Event == "handoff" {
			handoffs = append(handoffs, m)
		}
		for _, ch := range chunk.Choices {
			if !ch.JSON.Index.Valid() || !ch.JSON.Delta.Valid() {
				t.Errorf("chunk %d: choice without index or delta: %s", chunks, ch.RawJSON())
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(handoffs) != 1 || handoffs[0] != (metadata{AgentName: "billing", Event: "handoff", From: "triage", To: "billing", ToolCallID: "call_s1"}) {
		t.Errorf("handoff chunks: %+v", handoffs)
	}
	if len(acc.Choices) != 1 || acc.Choices[0].Message.Content != "Your refund is on its way." || acc.Choices[0].FinishReason != "stop" {
		t.Errorf("accumulated: %+v", acc.Choices)
	}
	if acc.Usage.PromptTokens != 24 || acc.Usage.CompletionTokens != 16 || acc.Usage.TotalTokens != 40 {
		t.Errorf("accumulated usage: %+v", acc.Usage)
	}
	if acc.Model != "support" || acc.ID == "" {
		t.Errorf("accumulated id %q, model %q", acc.ID, acc.Model)
	}
	if got := len(f.requests()); got != 2 {
		t.Errorf("upstream calls: %d", got)
	}
}

var weatherTool = openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
	Name:        "get_weather",
	Description: openai.String("Current weather in a city"),
	Parameters: openai.FunctionParameters{
		"type":       "object",
		"properties": map[string]any{"city": map[string]any{"type": "string"}},
		"required":   []string{"city"},
	},
})

// A client tool call comes back as tool_calls; the result goes back in
// the same session and the agent that called it goes on.
func TestClientToolsNonStreamed(t *testing.T) {
	f := newFake(t,
		fakeReply{ToolCalls: []fakeToolCall{{ID: "h1", Name: "transfer_to_billing", Arguments: map[string]string{"reason": "surcharge"}}}},
		fakeReply{ToolCalls: []fakeToolCall{{ID: "w1", Name: "get_weather", Arguments: map[string]string{"city": "Paris"}}}},
		fakeReply{Text: "Sunny in Paris, so no surcharge."},
	)
	oa := gateway(t, option.WithHeader("X-Session-Id", sessionID("tools")))
	params := user("Was I charged a weather surcharge in Paris?")
	params.Tools = []openai.ChatCompletionToolUnionParam{weatherTool}
	first, err := oa.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	requireFields(t, "chat.completion", first)
	msg := first.Choices[0].Message
	if first.Choices[0].FinishReason != "tool_calls" || len(msg.ToolCalls) != 1 || first.Metadata["agentName"] != "billing" {
		t.Fatalf("first turn: %s", first.RawJSON())
	}
	call := msg.ToolCalls[0].AsFunction()
	requireFields(t, "tool_call", call)
	if call.ID != "w1" || call.Function.Name != "get_weather" || call.Function.Arguments != `{"city":"Paris"}` {
		t.Errorf("tool call: %s", msg.ToolCalls[0].RawJSON())
	}
	// Content of a message that only calls tools is null, and present.
	if msg.JSON.Content.Raw() != "null" {
		t.Errorf("content %q, want null", msg.JSON.Content.Raw())
	}
	params.Messages = append(params.Messages, msg.ToParam(), openai.ToolMessage(`{"sky":"sunny"}`, "w1"))
	second, err := oa.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	requireFields(t, "chat.completion", second)
	if second.Choices[0].Message.Content != "Sunny in Paris, so no surcharge." || second.Metadata["agentName"] != "billing" {
		t.Errorf("second turn: %s", second.RawJSON())
	}
	reqs := f.requests()
	if len(reqs) != 3 || reqs[2].Body.Model != "billing-model" {
		t.Fatalf("upstream calls: %v", f.models())
	}
	last := reqs[2].Body.Messages[len(reqs[2].Body.Messages)-1]
	if last.Role != "tool" || last.ToolCallID != "w1" || string(last.Content) != `"{\"sky\":\"sunny\"}"` {
		t.Errorf("the tool result upstream: %+v", last)
	}
}

func TestClientToolsStreamed(t *testing.T) {
	f := newFake(t,
		fakeReply{ToolCalls: []fakeToolCall{{ID: "w2", Name: "get_weather", Arguments: map[string]string{"city": "Oslo"}}}},
		fakeReply{StreamChunks: []string{"Snow ", "in Oslo."}},
	)
	oa := gateway(t, option.WithHeader("X-Session-Id", sessionID("tools-stream")))
	params := user("Weather in Oslo?")
	params.Tools = []openai.ChatCompletionToolUnionParam{weatherTool}
	var acc openai.ChatCompletionAccumulator
	var finished []openai.FinishedChatCompletionToolCall
	stream := oa.Chat.Completions.NewStreaming(context.Background(), params)
	for stream.Next() {
		chunk := stream.Current()
		requireFields(t, "chunk", chunk)
		if !acc.AddChunk(chunk) {
			t.Fatalf("the accumulator refused %s", chunk.RawJSON())
		}
		if tc, ok := acc.JustFinishedToolCall(); ok {
			finished = append(finished, tc)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	_ = stream.Close()
	if len(finished) != 1 || finished[0].ID != "w2" || finished[0].Name != "get_weather" || finished[0].Arguments != `{"city":"Oslo"}` {
		t.Fatalf("finished tool calls: %+v", finished)
	}
	if acc.Choices[0].FinishReason != "tool_calls" {
		t.Errorf("finish_reason %q", acc.Choices[0].FinishReason)
	}
	// Only the new input: the tool result.
	next := openai.ChatCompletionNewParams{
		Model:    "support",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.ToolMessage(`{"sky":"snow"}`, "w2")},
		Tools:    params.Tools,
	}
	var acc2 openai.ChatCompletionAccumulator
	stream = oa.Chat.Completions.NewStreaming(context.Background(), next)
	for stream.Next() {
		if !acc2.AddChunk(stream.Current()) {
			t.Fatalf("the accumulator refused %s", stream.Current().RawJSON())
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	_ = stream.Close()
	if acc2.Choices[0].Message.Content != "Snow in Oslo." {
		t.Errorf("second turn: %+v", acc2.Choices)
	}
	if got := strings.Join(f.models(), ","); got != "triage-model,triage-model" {
		t.Errorf("upstream calls: %s", got)
	}
}

// The accumulated stream and the non-streamed reply of the same run agree,
// field for field that the SDK reads.
func TestStreamedAndNonStreamedAgree(t *testing.T) {
	script := []fakeReply{
		{ToolCalls: []fakeToolCall{{ID: "c1", Name: "transfer_to_tech-support", Arguments: map[string]string{"reason": "crash"}}}},
		{Text: "Reinstall the app."}, // split into chunks when streamed
	}
	newFake(t, script...)
	oa := gateway(t)
	plain, err := oa.Chat.Completions.New(context.Background(), user("the app crashes"))
	if err != nil {
		t.Fatal(err)
	}
	newFake(t, script...)
	stream := oa.Chat.Completions.NewStreaming(context.Background(), user("the app crashes"))
	acc := accumulate(t, stream)
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	_ = stream.Close()
	type view struct {
		Content, Role, FinishReason string
		Index                       int64
	}
	a := view{plain.Choices[0].Message.Content, string(plain.Choices[0].Message.Role), plain.Choices[0].FinishReason, plain.Choices[0].Index}
	b := view{acc.Choices[0].Message.Content, string(acc.Choices[0].Message.Role), acc.Choices[0].FinishReason, acc.Choices[0].Index}
	if a != b || a.Content != "Reinstall the app." {
		t.Errorf("non-streamed %+v, streamed %+v", a, b)
	}
	if plain.Metadata["agentName"] != "tech-support" {
		t.Errorf("metadata: %v", plain.Metadata)
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(plain.RawJSON()), &raw); err != nil || raw["object"] != "chat.completion" {
		t.Errorf("raw reply: %v %s", err, plain.RawJSON())
	}
}

// Streamed text the provider escapes (a line break, quotes, <, &) or
// writes as UTF-8 reaches the client delta for delta as the provider sent
// it, and whole in the accumulated answer: the gateway hands each delta on
// as the tail of the text it keeps, read from the provider's chunk.
func TestStreamedTextKeepsEveryCharacter(t *testing.T) {
	pieces := []string{"Line one,\n", "\"quoted\" <b> & ", "é 世界 🙂", "\ttab\\slash", " end."}
	newFake(t, fakeReply{StreamChunks: pieces})
	oa := gateway(t)
	stream := oa.Chat.Completions.NewStreaming(context.Background(), user("hi"))
	defer stream.Close()
	var acc openai.ChatCompletionAccumulator
	var deltas []string
	for stream.Next() {
		chunk := stream.Current()
		if !acc.AddChunk(chunk) {
			t.Fatalf("the accumulator refused %s", chunk.RawJSON())
		}
		for _, ch := range chunk.Choices {
			if ch.Delta.Content != "" {
				deltas = append(deltas, ch.Delta.Content)
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(deltas, pieces) {
		t.Errorf("deltas %q, want %q", deltas, pieces)
	}
	if len(acc.Choices) != 1 || acc.Choices[0].Message.Content != strings.Join(pieces, "") {
		t.Errorf("accumulated: %+v", acc.Choices)
	}
}
