package providers

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	openai "github.com/sashabaranov/go-openai"

	"github.com/switchboard-ai/switchboard/runtime"
)

// emptyObjectSchema is sent for a tool that declares no parameters: strict
// servers reject "parameters": null.
const emptyObjectSchema = `{"type":"object","properties":{}}`

// toOpenAI converts a runtime request to go-openai's, plus the patch that
// completes go-openai's body: the request's messages are left out of go-openai's
// struct and written by the patch (see body.go), as is what the struct cannot
// express.
func toOpenAI(req *runtime.ChatRequest) (openai.ChatCompletionRequest, *bodyPatch) {
	patch := &bodyPatch{messages: req.Messages}
	out := openai.ChatCompletionRequest{
		Model: req.Model.Model,
		// Empty, not nil: go-openai then writes "messages":[], which the
		// patch fills.
		Messages: []openai.ChatCompletionMessage{},
	}
	if len(req.Tools) > 0 {
		out.Tools = make([]openai.Tool, len(req.Tools))
		for i, t := range req.Tools {
			params := t.Parameters
			if len(bytes.TrimSpace(params)) == 0 || string(params) == "null" {
				params = json.RawMessage(emptyObjectSchema)
			}
			out.Tools[i] = openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
				Name: t.Name, Description: t.Description, Parameters: params, Strict: t.Strict,
			}}
		}
	}
	if p := req.Params; p != nil {
		applyParams(&out, p, len(req.Tools) > 0, patch)
	}
	if len(req.ToolChoice) > 0 && len(req.Tools) > 0 {
		// Verbatim: a named function, "none", "required" or "auto".
		patch.setField("tool_choice", req.ToolChoice)
	}
	if req.Stream {
		out.Stream = true
		// Always: the run sums usage over every call, streamed or not.
		out.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	}
	return out, patch
}

// applyParams copies the client's sampling parameters. A field the patch
// sets is one go-openai omits (a zero float, or a field left unset), so the
// patch adds the key and never repeats one.
func applyParams(out *openai.ChatCompletionRequest, p *runtime.Params, hasTools bool, patch *bodyPatch) {
	// Floats go through the patch as the float64 the client sent: go-openai
	// holds them as float32 (1e39 would be +Inf, which JSON cannot say)
	// and drops zeros (temperature 0 is greedy, not unset).
	for _, f := range []struct {
		key string
		v   *float64
	}{
		{"temperature", p.Temperature}, {"top_p", p.TopP},
		{"presence_penalty", p.PresencePenalty}, {"frequency_penalty", p.FrequencyPenalty},
	} {
		if f.v != nil {
			patch.setField(f.key, json.RawMessage(strconv.FormatFloat(*f.v, 'g', -1, 64)))
		}
	}
	if p.MaxTokens != nil {
		out.MaxTokens = int(*p.MaxTokens)
	}
	if p.MaxCompletionTokens != nil {
		out.MaxCompletionTokens = int(*p.MaxCompletionTokens)
	}
	if p.Seed != nil {
		seed := int(*p.Seed)
		out.Seed = &seed
	}
	out.Stop = p.Stop
	out.User = p.User
	out.ReasoningEffort = p.ReasoningEffort
	if p.ParallelToolCalls != nil && hasTools {
		out.ParallelToolCalls = *p.ParallelToolCalls
	}
	if len(p.ResponseFormat) > 0 {
		// Verbatim: go-openai's type would add "strict": false and drop
		// fields it does not know.
		patch.setField("response_format", p.ResponseFormat)
	}
}

// fromOpenAI converts a non-streamed answer.
func fromOpenAI(resp *openai.ChatCompletionResponse) (*runtime.ChatResponse, error) {
	if len(resp.Choices) == 0 {
		return nil, &answerError{"malformed answer: no choices"}
	}
	c := resp.Choices[0]
	msg := runtime.Message{Role: runtime.RoleAssistant, Content: c.Message.Content}
	if msg.Content == "" && len(c.Message.MultiContent) > 0 {
		var b strings.Builder
		for _, p := range c.Message.MultiContent {
			if p.Type == openai.ChatMessagePartTypeText {
				b.WriteString(p.Text)
			}
		}
		msg.Content = b.String()
	}
	for _, tc := range c.Message.ToolCalls {
		msg.ToolCalls = append(msg.ToolCalls, runtime.ToolCall{
			ID: tc.ID, Type: "function",
			Function: runtime.FunctionCall{Name: tc.Function.Name, Arguments: tc.Function.Arguments},
		})
	}
	if msg.Content == "" && len(msg.ToolCalls) == 0 && c.Message.Refusal != "" {
		msg.Content = c.Message.Refusal
	}
	return &runtime.ChatResponse{
		Message:      msg,
		FinishReason: string(c.FinishReason),
		Usage:        fromOpenAIUsage(resp.Usage),
		ID:           resp.ID,
	}, nil
}

// fromOpenAIUsage converts usage, filling a missing total.
func fromOpenAIUsage(u openai.Usage) runtime.Usage {
	out := runtime.Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
	if out.TotalTokens == 0 {
		out.TotalTokens = out.PromptTokens + out.CompletionTokens
	}
	if d := u.PromptTokensDetails; d != nil {
		out.CachedTokens = d.CachedTokens
	}
	if d := u.CompletionTokensDetails; d != nil {
		out.ReasoningTokens = d.ReasoningTokens
	}
	return out
}
