package fakeupstream

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// Request is one request the server received, as the client sent it.
type Request struct {
	// Path is the URL path, e.g. /v1/chat/completions.
	Path string
	// Body is the raw request body.
	Body []byte
	// Parsed is a typed view of Body; zero when Body is not valid JSON.
	Parsed ChatRequest
	// Header holds the request headers.
	Header http.Header
	// Canceled is closed when the client went away while the server was
	// still answering (a cancelled context, a dropped connection). It stays
	// open when the answer was delivered.
	Canceled <-chan struct{}
}

// ChatRequest is a typed view of a chat completion request body. Pointer
// fields are nil when the client did not send them.
type ChatRequest struct {
	Model               string          `json:"model"`
	Messages            []Message       `json:"messages"`
	Tools               []Tool          `json:"tools,omitempty"`
	ToolChoice          any             `json:"tool_choice,omitempty"`
	Stream              bool            `json:"stream,omitempty"`
	StreamOptions       *StreamOptions  `json:"stream_options,omitempty"`
	Temperature         *float64        `json:"temperature,omitempty"`
	TopP                *float64        `json:"top_p,omitempty"`
	MaxTokens           *int            `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int            `json:"max_completion_tokens,omitempty"`
	Stop                json.RawMessage `json:"stop,omitempty"`
	Seed                *int            `json:"seed,omitempty"`
	PresencePenalty     *float64        `json:"presence_penalty,omitempty"`
	FrequencyPenalty    *float64        `json:"frequency_penalty,omitempty"`
	User                string          `json:"user,omitempty"`
	ParallelToolCalls   *bool           `json:"parallel_tool_calls,omitempty"`
	ResponseFormat      json.RawMessage `json:"response_format,omitempty"`
}

// StreamOptions is the request's stream_options.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// Message is one message of a request. Content is what JSON decoding gives:
// a string, a []any of content parts, or nil when null or absent (Body
// tells those two apart).
type Message struct {
	Role       string     `json:"role"`
	Content    any        `json:"content"`
	Name       string     `json:"name,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// Text returns the message's text: its string content, or the text parts of
// an array content joined.
func (m Message) Text() string {
	switch c := m.Content.(type) {
	case string:
		return c
	case []any:
		var b strings.Builder
		for _, p := range c {
			if part, ok := p.(map[string]any); ok && part["type"] == "text" {
				s, _ := part["text"].(string)
				b.WriteString(s)
			}
		}
		return b.String()
	}
	return ""
}

// Tool is one tool offered in a request.
type Tool struct {
	Type     string   `json:"type"`
	Function Function `json:"function"`
}

// Function is the function part of a Tool.
type Function struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// ToolCall is a function call: one the server answers with (in a Reply), or
// one a request's assistant message carries. Its JSON form is OpenAI's
// {"id", "type": "function", "function": {"name", "arguments"}}.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string
}

// wireToolCall is ToolCall's JSON form.
type wireToolCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// MarshalJSON writes the OpenAI shape.
func (c ToolCall) MarshalJSON() ([]byte, error) {
	w := wireToolCall{ID: c.ID, Type: "function"}
	w.Function.Name, w.Function.Arguments = c.Name, c.Arguments
	return json.Marshal(w)
}

// UnmarshalJSON reads the OpenAI shape.
func (c *ToolCall) UnmarshalJSON(b []byte) error {
	var w wireToolCall
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*c = ToolCall{ID: w.ID, Name: w.Function.Name, Arguments: w.Function.Arguments}
	return nil
}

// Usage is the token usage a reply reports.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	// The details OpenAI gives, when set.
	PromptTokensDetails     *PromptTokensDetails     `json:"prompt_tokens_details,omitempty"`
	CompletionTokensDetails *CompletionTokensDetails `json:"completion_tokens_details,omitempty"`
}

// PromptTokensDetails are the prompt's tokens read from the cache.
type PromptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// CompletionTokensDetails are the completion's tokens spent reasoning.
type CompletionTokensDetails struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}

// Reply scripts the server's answer to one request. The zero Reply answers
// an empty assistant message with finish_reason stop.
type Reply struct {
	// Text is the assistant's content. For a non-200 Status it is the
	// error message instead (default: the status text).
	Text string
	// ToolCalls are the assistant's tool calls.
	ToolCalls []ToolCall
	// Refusal, when set, is the assistant's refusal, as OpenAI sends one:
	// the message's `refusal` with a null `content` (Text is then
	// ignored), or streamed as `refusal` deltas (StreamChunks then split
	// the refusal).
	Refusal string
	// FinishReason defaults to "tool_calls" when there are ToolCalls, else "stop".
	FinishReason string
	// Usage defaults to prompt 10, completion 5, total 15. TotalTokens 0 is
	// filled in as the sum.
	Usage *Usage
	// Status, when set and not 200, answers an OpenAI error body
	// {"error": {"message", "type", "code"}} with that status.
	Status int
	// RetryAfter, when set, is sent as the Retry-After header.
	RetryAfter string
	// Header holds extra response headers.
	Header http.Header
	// Delay is waited before the response headers are sent.
	Delay time.Duration
	// StreamChunks, when set, are the content deltas of a streamed reply
	// (Text is then ignored). By default Text is split into about 3 pieces.
	StreamChunks []string
	// ChunkDelay is waited before each streamed chunk except the role
	// chunk and the one right after it.
	ChunkDelay time.Duration
	// Gate, when set, is received from before each streamed chunk except
	// the role chunk and the one right after it (after ChunkDelay): a
	// test sends on it, or closes it, to let the next chunk go, and so
	// knows the chunks it waits for come in reads of their own.
	Gate <-chan struct{}
	// Together sends the whole streamed reply in one write, as a
	// provider's chunks reach a gateway that reads them late.
	Together bool
	// Hang never answers: the handler waits until the client goes away (or
	// the server closes) and records the cancellation.
	Hang bool
	// Abort drops the connection after the reply has started: a streamed
	// reply sends its role and content chunks, then the connection dies
	// without a finish chunk or [DONE]; a non-streamed reply sends its
	// headers and half of its body.
	Abort bool
	// StreamError, on a streamed reply, is sent after the content chunks as
	// `data: {"error": {...}}` with this message, ending the stream.
	StreamError string
	// Func, when set, computes the reply from the request; the other fields
	// of this Reply are ignored.
	Func func(r Request) Reply
}

// Echo is a Reply.Func that answers the text of the request's last user
// message.
func Echo(r Request) Reply {
	for i := len(r.Parsed.Messages) - 1; i >= 0; i-- {
		if m := r.Parsed.Messages[i]; m.Role == "user" {
			return Reply{Text: m.Text()}
		}
	}
	return Reply{}
}
