package providers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"

	openai "github.com/sashabaranov/go-openai"

	"github.com/switchboard-ai/switchboard/runtime"
)

// emptyObjectSchema is sent for a tool that declares no parameters: strict
// servers reject "parameters": null.
const emptyObjectSchema = `{"type":"object","properties":{}}`

// toOpenAI converts a runtime request to go-openai's, plus the patch that
// fixes what go-openai's struct cannot say (see bodyPatch); the patch is nil
// when none is needed, which is the common case. The messages are built in
// buf's memory (see messageBuffers).
func toOpenAI(req *runtime.ChatRequest, buf *[]openai.ChatCompletionMessage) (openai.ChatCompletionRequest, *bodyPatch) {
	var patch bodyPatch
	*buf = slices.Grow((*buf)[:0], len(req.Messages))[:len(req.Messages)]
	out := openai.ChatCompletionRequest{
		Model:    req.Model.Model,
		Messages: *buf,
	}
	for i := range req.Messages {
		out.Messages[i] = toOpenAIMessage(&req.Messages[i], i, &patch)
	}
	if len(req.Tools) > 0 {
		out.Tools = make([]openai.Tool, len(req.Tools))
		for i, t := range req.Tools {
			params := t.Parameters
			if len(bytes.TrimSpace(params)) == 0 || string(params) == "null" {
				params = json.RawMessage(emptyObjectSchema)
			}
			out.Tools[i] = openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
				Name: t.Name, Description: t.Description, Parameters: params,
			}}
		}
	}
	if p := req.Params; p != nil {
		applyParams(&out, p, len(req.Tools) > 0, &patch)
	}
	if req.Stream {
		out.Stream = true
		// Always: the run sums usage over every call, streamed or not.
		out.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	}
	if patch.empty() {
		return out, nil
	}
	return out, &patch
}

// messageBuffers reuses go-openai message lists from call to call: in a long
// session a fresh list per call is a large allocation (about 150 bytes a
// message) that the garbage collector must sweep every turn. go-openai
// encodes the request while the call is made and keeps nothing of it after,
// so a list is free again once Chat returns. The zero value is ready to use.
type messageBuffers struct{ pool sync.Pool }

// get returns a list to convert into.
func (b *messageBuffers) get() *[]openai.ChatCompletionMessage {
	if buf, ok := b.pool.Get().(*[]openai.ChatCompletionMessage); ok {
		return buf
	}
	return new([]openai.ChatCompletionMessage)
}

// put clears buf, so that an idle list holds no transcript alive, and pools
// it.
func (b *messageBuffers) put(buf *[]openai.ChatCompletionMessage) {
	clear(*buf)
	*buf = (*buf)[:0]
	b.pool.Put(buf)
}

// toOpenAIMessage converts message i.
func toOpenAIMessage(m *runtime.Message, i int, patch *bodyPatch) openai.ChatCompletionMessage {
	om := openai.ChatCompletionMessage{Role: m.Role, Name: m.Name, ToolCallID: m.ToolCallID}
	switch {
	case len(m.Parts) > 0:
		// MultiContent knows only text and image_url parts; the patch
		// sends the client's parts verbatim so no other kind is lost.
		var parts []openai.ChatMessagePart
		if json.Unmarshal(m.Parts, &parts) == nil {
			om.MultiContent = parts
		}
		patch.setContent(i, m.Parts)
	case m.Content != "":
		om.Content = m.Content
	case m.Role == runtime.RoleAssistant && len(m.ToolCalls) > 0:
		// go-openai omits the empty content, which OpenAI and strict
		// servers accept for an assistant message that only calls tools.
	default:
		// go-openai would omit "content", and servers require it on user,
		// system and tool messages: send "" instead.
		patch.setContent(i, json.RawMessage(`""`))
	}
	for _, c := range m.ToolCalls {
		args := c.Function.Arguments
		if args == "" {
			args = "{}" // go-openai omits empty arguments; servers want a string
		}
		om.ToolCalls = append(om.ToolCalls, openai.ToolCall{
			ID: c.ID, Type: openai.ToolTypeFunction,
			Function: openai.FunctionCall{Name: c.Function.Name, Arguments: args},
		})
	}
	return om
}

// applyParams copies the client's sampling parameters.
func applyParams(out *openai.ChatCompletionRequest, p *runtime.Params, hasTools bool, patch *bodyPatch) {
	// go-openai drops zero floats (omitempty), so temperature 0 (greedy)
	// and top_p 0 go through the patch.
	if p.Temperature != nil {
		out.Temperature = *p.Temperature
		if *p.Temperature == 0 {
			patch.setField("temperature", json.RawMessage("0"))
		}
	}
	if p.TopP != nil {
		out.TopP = *p.TopP
		if *p.TopP == 0 {
			patch.setField("top_p", json.RawMessage("0"))
		}
	}
	if p.MaxTokens != nil {
		out.MaxTokens = *p.MaxTokens
	}
	if p.MaxCompletionTokens != nil {
		out.MaxCompletionTokens = *p.MaxCompletionTokens
	}
	if p.PresencePenalty != nil {
		out.PresencePenalty = *p.PresencePenalty
	}
	if p.FrequencyPenalty != nil {
		out.FrequencyPenalty = *p.FrequencyPenalty
	}
	out.Stop = p.Stop
	out.Seed = p.Seed
	out.User = p.User
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
		return nil, fmt.Errorf("answer has no choices")
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
	return out
}

// bodyPatch rewrites the JSON body go-openai built where its struct cannot
// express the request: zero temperature, content "" and verbatim content
// parts or response_format. It is applied to every attempt's body.
type bodyPatch struct {
	fields  map[string]json.RawMessage // top-level fields, set verbatim
	content map[int]json.RawMessage    // messages[i].content, set verbatim
}

func (p *bodyPatch) empty() bool { return len(p.fields) == 0 && len(p.content) == 0 }

func (p *bodyPatch) setField(k string, v json.RawMessage) {
	if p.fields == nil {
		p.fields = map[string]json.RawMessage{}
	}
	p.fields[k] = v
}

func (p *bodyPatch) setContent(i int, v json.RawMessage) {
	if p.content == nil {
		p.content = map[int]json.RawMessage{}
	}
	p.content[i] = v
}

// apply rewrites req's body.
func (p *bodyPatch) apply(req *http.Request) error {
	if req.Body == nil {
		return nil
	}
	raw, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return fmt.Errorf("read request body: %w", err)
	}
	b, err := p.patch(raw)
	if err != nil {
		return fmt.Errorf("patch request body: %w", err)
	}
	req.Body = io.NopCloser(bytes.NewReader(b))
	req.ContentLength = int64(len(b))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	return nil
}

// patch returns body with the patch applied.
func (p *bodyPatch) patch(body []byte) ([]byte, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, err
	}
	for k, v := range p.fields {
		top[k] = v
	}
	if len(p.content) > 0 {
		var msgs []map[string]json.RawMessage
		if err := json.Unmarshal(top["messages"], &msgs); err != nil {
			return nil, err
		}
		for i, v := range p.content {
			if i < len(msgs) {
				msgs[i]["content"] = v
			}
		}
		b, err := json.Marshal(msgs)
		if err != nil {
			return nil, err
		}
		top["messages"] = b
	}
	return json.Marshal(top)
}
