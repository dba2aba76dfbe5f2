package gateway

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"

	"github.com/switchboard-ai/switchboard/runtime"
)

// The Responses API's objects, as OpenAI's `Response` and the Open
// Responses `ResponseResource` both require them: every field either
// schema requires is written, null where Switchboard has nothing to say.

// responseObject is a response (`object: "response"`).
type responseObject struct {
	ID                 string             `json:"id"`
	Object             string             `json:"object"`
	CreatedAt          int64              `json:"created_at"`
	CompletedAt        *int64             `json:"completed_at"`
	Status             string             `json:"status"`
	Error              *responseError     `json:"error"`
	IncompleteDetails  *incompleteDetails `json:"incomplete_details"`
	Model              string             `json:"model"`
	PreviousResponseID *string            `json:"previous_response_id"`
	Instructions       *string            `json:"instructions"`
	// Output holds *messageItem, *functionCallItem and *handoffItem.
	Output            []any             `json:"output"`
	Tools             []responseTool    `json:"tools"`
	ToolChoice        any               `json:"tool_choice"` // "auto", or the request's`
	Truncation        string            `json:"truncation"`
	ParallelToolCalls bool              `json:"parallel_tool_calls"`
	Text              responseText      `json:"text"`
	Temperature       float64           `json:"temperature"`
	TopP              float64           `json:"top_p"`
	PresencePenalty   float32           `json:"presence_penalty"`
	FrequencyPenalty  float32           `json:"frequency_penalty"`
	TopLogprobs       int               `json:"top_logprobs"`
	Reasoning         *struct{}         `json:"reasoning"`
	Usage             *responseUsage    `json:"usage"`
	MaxOutputTokens   *runtime.IntParam `json:"max_output_tokens"`
	MaxToolCalls      *int              `json:"max_tool_calls"`
	Store             bool              `json:"store"`
	Background        bool              `json:"background"`
	ServiceTier       string            `json:"service_tier"`
	Metadata          map[string]string `json:"metadata"`
	SafetyIdentifier  *string           `json:"safety_identifier"`
	PromptCacheKey    *string           `json:"prompt_cache_key"`
}

// responseError is a failed response's error.
type responseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// incompleteDetails says why a response is incomplete.
type incompleteDetails struct {
	Reason string `json:"reason"`
}

// responseTool echoes a client function tool.
type responseTool struct {
	Type        string  `json:"type"`
	Name        string  `json:"name"`
	Description *string `json:"description"`
	Parameters  any     `json:"parameters"`
	Strict      *bool   `json:"strict"`
}

// responseText is the text configuration: the format the provider was
// asked for, a textFormat or a *jsonSchemaFormat.
type responseText struct {
	Format any `json:"format"`
}

// textFormat is plain text (the default) or json_object.
type textFormat struct {
	Type string `json:"type"`
}

// jsonSchemaFormat is a json_schema format, with every member Open
// Responses requires of it; description is a string (empty when the
// request gave none), as OpenAI's schema admits no null there.
type jsonSchemaFormat struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Strict      bool            `json:"strict"`
}

// responseUsage sums the run's model calls.
type responseUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens     int `json:"cached_tokens"`
		CacheWriteTokens int `json:"cache_write_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

// messageItem is an output message of the assistant.
type messageItem struct {
	Type    string       `json:"type"`
	ID      string       `json:"id"`
	Status  string       `json:"status"`
	Role    string       `json:"role"`
	Content []outputText `json:"content"`
}

// outputText is a message's text part.
type outputText struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
	Logprobs    []any  `json:"logprobs"`
}

func newOutputText(text string) outputText {
	return outputText{Type: "output_text", Text: text, Annotations: []any{}, Logprobs: []any{}}
}

// functionCallItem is a call of a client tool.
type functionCallItem struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Status    string `json:"status"`
}

// handoffItem is a handoff, in the output only when the request's include
// asks for switchboard:handoffs. Its type carries the implementor prefix
// that the Open Responses specification asks of extension items.
type handoffItem struct {
	Type       string `json:"type"`
	ID         string `json:"id"`
	Status     string `json:"status"`
	From       string `json:"from"`
	To         string `json:"to"`
	ToolCallID string `json:"toolCallId"`
}

// The streamed events. Each carries its type (also the SSE `event:` name)
// and its sequence_number, the event's position in the stream from 0.

type responseEvent struct {
	Type           string          `json:"type"`
	SequenceNumber int             `json:"sequence_number"`
	Response       *responseObject `json:"response"`
}

type itemEvent struct {
	Type           string `json:"type"`
	SequenceNumber int    `json:"sequence_number"`
	OutputIndex    int    `json:"output_index"`
	Item           any    `json:"item"`
}

type partEvent struct {
	Type           string     `json:"type"`
	SequenceNumber int        `json:"sequence_number"`
	ItemID         string     `json:"item_id"`
	OutputIndex    int        `json:"output_index"`
	ContentIndex   int        `json:"content_index"`
	Part           outputText `json:"part"`
}

type textDeltaEvent struct {
	Type           string `json:"type"`
	SequenceNumber int    `json:"sequence_number"`
	ItemID         string `json:"item_id"`
	OutputIndex    int    `json:"output_index"`
	ContentIndex   int    `json:"content_index"`
	Delta          string `json:"delta"`
	Logprobs       []any  `json:"logprobs"`
}

type textDoneEvent struct {
	Type           string `json:"type"`
	SequenceNumber int    `json:"sequence_number"`
	ItemID         string `json:"item_id"`
	OutputIndex    int    `json:"output_index"`
	ContentIndex   int    `json:"content_index"`
	Text           string `json:"text"`
	Logprobs       []any  `json:"logprobs"`
}

type argsDeltaEvent struct {
	Type           string `json:"type"`
	SequenceNumber int    `json:"sequence_number"`
	ItemID         string `json:"item_id"`
	OutputIndex    int    `json:"output_index"`
	Delta          string `json:"delta"`
}

type argsDoneEvent struct {
	Type           string `json:"type"`
	SequenceNumber int    `json:"sequence_number"`
	ItemID         string `json:"item_id"`
	OutputIndex    int    `json:"output_index"`
	Name           string `json:"name"`
	Arguments      string `json:"arguments"`
}

// handoffEvent is the switchboard:handoff event (opt-in, like handoffItem).
type handoffEvent struct {
	Type           string `json:"type"`
	SequenceNumber int    `json:"sequence_number"`
	From           string `json:"from"`
	To             string `json:"to"`
	ToolCallID     string `json:"toolCallId"`
}

// newID returns prefix followed by 24 random bytes in hex: response ids are
// unguessable, since knowing one is enough to continue its conversation.
func newID(prefix string) string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
