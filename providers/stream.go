package providers

import (
	"slices"
	"strings"

	openai "github.com/sashabaranov/go-openai"

	"github.com/switchboard-ai/switchboard/runtime"
)

// streamAcc assembles a streamed answer from its chunks.
type streamAcc struct {
	// What a text chunk touches first (call's layout).
	chunks int
	id     string
	text   strings.Builder
	finish string
	usage  *openai.Usage
	calls  []*callAcc // in order of first appearance
}

// callAcc is one tool call being assembled.
type callAcc struct {
	index int
	id    string
	name  string
	args  strings.Builder
}

// add takes one chunk; content deltas reach onDelta at once.
func (s *streamAcc) add(chunk *openai.ChatCompletionStreamResponse, onDelta func(string)) {
	s.chunks++
	if s.id == "" {
		s.id = chunk.ID
	}
	if chunk.Usage != nil {
		s.usage = chunk.Usage
	}
	for i := range chunk.Choices {
		c := &chunk.Choices[i]
		if c.Index != 0 {
			continue // only one choice is ever asked for
		}
		d := c.Delta.Content
		if d == "" {
			d = c.Delta.Refusal // as readChunk reads it
		}
		if d != "" {
			s.text.WriteString(d)
			if onDelta != nil {
				onDelta(d)
			}
		}
		for _, tc := range c.Delta.ToolCalls {
			s.addCall(tc)
		}
		if c.FinishReason != "" && c.FinishReason != openai.FinishReasonNull {
			s.finish = string(c.FinishReason)
		}
	}
}

// take is add for what readChunk read of a chunk.
func (s *streamAcc) take(f *chunkRead, onDelta func(string)) {
	s.chunks++
	if s.id == "" {
		s.id = f.id
	}
	if f.usage != nil {
		s.usage = f.usage
	}
	if len(f.content) > 0 {
		// The delta handed over is the text's own tail: what a
		// strings.Builder holds is never written again, so the string
		// stays as it is whatever the builder does next.
		n := s.text.Len()
		s.text.Write(f.content)
		if onDelta != nil {
			onDelta(s.text.String()[n:])
		}
	}
	if f.finish != "" && f.finish != string(openai.FinishReasonNull) {
		s.finish = f.finish
	}
}

// addCall merges one tool call delta. Deltas carry an index; the first of
// a call brings its id and name, later ones pieces of the arguments. A
// server that sends no index is followed by id: a new id starts a new
// call, no id continues the last one.
func (s *streamAcc) addCall(tc openai.ToolCall) {
	var last *callAcc
	if n := len(s.calls); n > 0 {
		last = s.calls[n-1]
	}
	var call *callAcc
	switch {
	case tc.Index != nil:
		for _, c := range s.calls {
			if c.index == *tc.Index {
				call = c
				break
			}
		}
		if call == nil {
			call = &callAcc{index: *tc.Index}
			s.calls = append(s.calls, call)
		}
	case last != nil && (tc.ID == "" || tc.ID == last.id):
		call = last
	default:
		next := 0
		for _, c := range s.calls {
			next = max(next, c.index+1)
		}
		call = &callAcc{index: next}
		s.calls = append(s.calls, call)
	}
	if tc.ID != "" {
		call.id = tc.ID
	}
	if tc.Function.Name != "" && call.name == "" {
		call.name = tc.Function.Name
	}
	call.args.WriteString(tc.Function.Arguments)
}

// errEmptyStream is a stream that ended before saying anything.
var errEmptyStream error = &answerError{"stream ended without an answer"}

// errTruncatedStream is a stream that ended without a finish reason.
var errTruncatedStream error = &answerError{"stream ended without a finish reason"}

// result builds the assembled answer.
func (s *streamAcc) result() (*runtime.ChatResponse, error) {
	if s.chunks == 0 || (s.finish == "" && s.text.Len() == 0 && len(s.calls) == 0) {
		return nil, errEmptyStream
	}
	msg := runtime.Message{Role: runtime.RoleAssistant, Content: s.text.String()}
	calls := slices.Clone(s.calls)
	slices.SortStableFunc(calls, func(a, b *callAcc) int { return a.index - b.index })
	for _, c := range calls {
		msg.ToolCalls = append(msg.ToolCalls, runtime.ToolCall{
			ID: c.id, Type: "function",
			Function: runtime.FunctionCall{Name: c.name, Arguments: c.args.String()},
		})
	}
	if s.finish == "" {
		// A stream cut short (an upstream that died behind a proxy, a body
		// ended by the connection closing) looks like a clean end; without
		// a finish reason the answer may be half of one, and a session must
		// never store that.
		return nil, errTruncatedStream
	}
	out := &runtime.ChatResponse{Message: msg, FinishReason: s.finish, ID: s.id}
	if s.usage != nil {
		out.Usage = fromOpenAIUsage(*s.usage)
	}
	return out, nil
}
