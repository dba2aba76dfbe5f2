package providers

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	openai "github.com/sashabaranov/go-openai"

	"github.com/switchboard-ai/switchboard/internal/freshstack"
)

// takeChunk hands one stream event's chunk to the assembler. Most chunks
// are a role, a piece of text, a finish reason or the usage: readChunk
// reads those without reflection or allocation, into a chunkRead on this
// goroutine's stack. Anything else, and anything it is not sure it reads
// exactly as encoding/json does, is decoded by encoding/json into spare,
// as go-openai would, and added from there.
// Decoding every chunk by reflection was the largest part of the CPU a
// gateway stream cost beyond a proxy's; decoding into go-openai's chunk
// type, even without reflection, touched its three cache lines and a
// 232-byte choice at every chunk, gone cold while the stream waited (issue
// 22). chunk_test.go and FuzzDecodeChunk hold the two ways to the same
// assembler.
func (s *streamAcc) takeChunk(data []byte, spare *openai.ChatCompletionStreamResponse, onDelta func(string)) error {
	var f chunkRead
	if readChunk(data, &f, s.id == "") {
		s.take(&f, onDelta)
		return nil
	}
	resetChunk(spare)
	if err := unmarshalChunk(data, spare); err != nil {
		return err
	}
	s.add(spare, onDelta)
	return nil
}

// chunkRead is what readChunk reads of a chunk: what streamAcc takes of it
// (take), which is the choice of index 0 of it and no other.
type chunkRead struct {
	id string // "" when not asked for (readChunk's wantID)
	// content is the text of its choice of index 0: the chunk's own bytes
	// when it has no escape, so valid only until the next event is read.
	content []byte
	finish  string // that choice's finish reason
	usage   *openai.Usage
	zero    bool // a choice of index 0 was read
}

// unmarshalChunk decodes a chunk readChunk could not with encoding/json,
// aside: encoding/json goes 2.4 KB deep, and from where a stream is read,
// that is past the 7 KB that keeps the stream's goroutine at an 8 KB stack
// (freshstack). A chunk of a tool call comes this way, and any chunk
// readChunk is not sure of; text, finish and usage chunks do not.
func unmarshalChunk(data []byte, c *openai.ChatCompletionStreamResponse) (err error) {
	freshstack.Run(func() { err = json.Unmarshal(data, c) })
	return err
}

// resetChunk zeroes c but for the room of its choices.
func resetChunk(c *openai.ChatCompletionStreamResponse) {
	choices := c.Choices[:cap(c.Choices)]
	clear(choices)
	*c = openai.ChatCompletionStreamResponse{Choices: choices[:0]}
}

// readChunk reads data into f, which is zero, and reports whether it
// could. Keys are matched as written; a key encoding/json would match to a
// field in another case (or any key outside ASCII), and every field
// readChunk does not read but go-openai decodes into something other than
// a string or a number, makes it give up unless its value is null, and so
// does a second choice of index 0. The id is read only when wantID is set
// (the assembler keeps the first chunk's; later ones are checked, not
// kept).
func readChunk(data []byte, f *chunkRead, wantID bool) bool {
	s := scanner{b: data}
	sawChoices := false
	ok := s.object(func(key []byte) bool {
		switch string(key) {
		case "id":
			if s.null() {
				return true
			}
			if !wantID {
				return s.skipString()
			}
			v, ok := s.str()
			f.id = v
			return ok
		case "object", "model", "system_fingerprint":
			return s.null() || s.skipString()
		case "created":
			return s.null() || s.integer(nil)
		case "choices":
			if sawChoices {
				return false
			}
			sawChoices = true
			return s.null() || s.array(func() bool { return s.choice(f) })
		case "usage":
			if f.usage != nil {
				return false // a repeated key: encoding/json would merge or clear
			}
			return s.null() || s.usage(f)
		case "prompt_annotations", "prompt_filter_results":
			return s.null()
		}
		return !foldsTo(key, "id", "object", "created", "model", "choices", "system_fingerprint", "usage",
			"prompt_annotations", "prompt_filter_results") && s.skip(0)
	})
	s.space()
	return ok && s.i == len(s.b)
}

// choice reads one choice, into f if its index is 0.
func (s *scanner) choice(f *chunkRead) bool {
	if s.peek() != '{' {
		return false
	}
	var index int
	var content []byte
	var finish string
	sawDelta := false
	ok := s.object(func(key []byte) bool {
		switch string(key) {
		case "index":
			return s.null() || s.integer(&index)
		case "finish_reason":
			if s.null() {
				return true
			}
			v, ok := s.str()
			finish = v
			return ok
		case "delta":
			if sawDelta {
				return false
			}
			sawDelta = true
			return s.null() || s.delta(&content)
		case "logprobs", "content_filter_results":
			return s.null()
		}
		return !foldsTo(key, "index", "delta", "logprobs", "finish_reason", "content_filter_results") && s.skip(0)
	})
	switch {
	case !ok:
		return false
	case index != 0:
		return true // only one choice is ever asked for
	case f.zero:
		return false // a second choice 0: left to encoding/json
	}
	f.zero, f.content, f.finish = true, content, finish
	return true
}

// delta reads a choice's delta: its text, which is a refusal's when the
// delta has no content (as an answer in one piece gives a refusal as its
// text: convert.go); a tool call or a function call is left to
// encoding/json.
func (s *scanner) delta(content *[]byte) bool {
	var text, refusal []byte
	ok := s.object(func(key []byte) bool {
		var into *[]byte
		switch string(key) {
		case "content":
			into = &text
		case "refusal":
			into = &refusal
		case "role", "reasoning_content":
			return s.null() || s.skipString()
		case "tool_calls", "function_call":
			return s.null()
		default:
			return !foldsTo(key, "content", "role", "function_call", "tool_calls", "refusal", "reasoning_content") && s.skip(0)
		}
		if s.null() {
			return true // as encoding/json: the value before stays
		}
		v, ok := s.text()
		*into = v
		return ok
	})
	if len(text) == 0 {
		text = refusal
	}
	*content = text
	return ok
}

// usage reads a chunk's usage, which every stream asked for it ends with:
// its counts and their details. A repeated key gives up (encoding/json
// would merge the objects).
func (s *scanner) usage(f *chunkRead) bool {
	if s.peek() != '{' || f.usage != nil {
		return false
	}
	u := &openai.Usage{}
	f.usage = u
	return s.object(func(key []byte) bool {
		switch string(key) {
		case "prompt_tokens":
			return s.null() || s.integer(&u.PromptTokens)
		case "completion_tokens":
			return s.null() || s.integer(&u.CompletionTokens)
		case "total_tokens":
			return s.null() || s.integer(&u.TotalTokens)
		case "prompt_tokens_details":
			return details(s, &u.PromptTokensDetails, func(d *openai.PromptTokensDetails) []count {
				return []count{{"audio_tokens", &d.AudioTokens}, {"cached_tokens", &d.CachedTokens}}
			})
		case "completion_tokens_details":
			return details(s, &u.CompletionTokensDetails, func(d *openai.CompletionTokensDetails) []count {
				return []count{{"audio_tokens", &d.AudioTokens}, {"reasoning_tokens", &d.ReasoningTokens},
					{"accepted_prediction_tokens", &d.AcceptedPredictionTokens}, {"rejected_prediction_tokens", &d.RejectedPredictionTokens}}
			})
		}
		return !foldsTo(key, "prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details", "completion_tokens_details") && s.skip(0)
	})
}

// details reads a usage's details object into *p, null leaving it nil;
// fields names its integer fields. A second one gives up (encoding/json
// would merge them).
func details[T any](s *scanner, p **T, fields func(*T) []count) bool {
	if *p != nil {
		return false
	}
	if s.null() {
		return true
	}
	*p = new(T)
	return s.counts(fields(*p)...)
}

// count is an integer field of an object, by key.
type count struct {
	key string
	v   *int
}

// counts reads an object of integers into fields; other keys are skipped,
// unless encoding/json could match them to a field.
func (s *scanner) counts(fields ...count) bool {
	if s.peek() != '{' {
		return false
	}
	return s.object(func(key []byte) bool {
		for _, f := range fields {
			if string(key) == f.key {
				return s.null() || s.integer(f.v)
			}
		}
		for _, f := range fields {
			if foldsTo(key, f.key) {
				return false
			}
		}
		return s.skip(0)
	})
}

// foldsTo reports whether encoding/json could match key to one of fields:
// equal but for case, or not plain ASCII (which readChunk does not judge).
func foldsTo(key []byte, fields ...string) bool {
	for _, b := range key {
		if b >= utf8.RuneSelf {
			return true
		}
	}
	for _, f := range fields {
		if bytes.EqualFold(key, []byte(f)) {
			return true
		}
	}
	return false
}
