package providers

import (
	"bytes"
	"encoding/json"
	"unicode/utf16"
	"unicode/utf8"

	openai "github.com/sashabaranov/go-openai"

	"github.com/switchboard-ai/switchboard/internal/freshstack"
)

// takeChunk hands one stream event's chunk to the assembler. Most chunks
// are a role, a piece of text, a finish reason or the usage: readChunk
// reads those without reflection, with at most one allocation (the text),
// into a chunkRead on this goroutine's stack. Anything else, and anything
// it is not sure it reads exactly as encoding/json does, is decoded by
// encoding/json into spare, as go-openai would, and added from there.
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
	id      string // "" when not asked for (readChunk's wantID)
	content string // the text of its choice of index 0
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
	var content, finish string
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

// delta reads a choice's delta: its text; a tool call or a function call
// is left to encoding/json.
func (s *scanner) delta(content *string) bool {
	return s.object(func(key []byte) bool {
		switch string(key) {
		case "content":
			if s.null() {
				return true
			}
			v, ok := s.str()
			*content = v
			return ok
		case "role", "refusal", "reasoning_content":
			return s.null() || s.skipString()
		case "tool_calls", "function_call":
			return s.null()
		}
		return !foldsTo(key, "content", "role", "function_call", "tool_calls", "refusal", "reasoning_content") && s.skip(0)
	})
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

// scanner walks a JSON text. Every method fails (returns false) on what it
// does not expect, on invalid JSON, and on valid JSON it is not sure to
// read as encoding/json would.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) space() {
	if s.i < len(s.b) && s.b[s.i] > ' ' {
		return // no white space: what providers send, between every token
	}
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) peek() byte {
	s.space()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// literal consumes lit if it comes next.
func (s *scanner) literal(lit string) bool {
	if s.peek() == lit[0] && len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
		s.i += len(lit)
		return true
	}
	return false
}

// token consumes the one-byte token c (a bracket, a colon, a comma) if it
// comes next: a chunk has a few dozen of them.
func (s *scanner) token(c byte) bool {
	if s.peek() == c {
		s.i++
		return true
	}
	return false
}

func (s *scanner) null() bool { return s.literal("null") }

// object reads an object, calling field with each key (a plain string) and
// the scanner at the key's value, which field must consume.
func (s *scanner) object(field func(key []byte) bool) bool {
	if !s.token('{') {
		return false
	}
	if s.token('}') {
		return true
	}
	for {
		if s.peek() != '"' {
			return false
		}
		key, ok := s.plainString()
		if !ok || !s.token(':') || !field(key) {
			return false
		}
		if s.token(',') {
			continue
		}
		return s.token('}')
	}
}

// array reads an array, calling elem at each element, which elem must
// consume.
func (s *scanner) array(elem func() bool) bool {
	if !s.token('[') {
		return false
	}
	if s.token(']') {
		return true
	}
	for {
		if !elem() {
			return false
		}
		if s.token(',') {
			continue
		}
		return s.token(']')
	}
}

// plainString reads a string with no escape, no control character and
// valid UTF-8, which is the string encoding/json reads too, and returns its
// bytes. On any other string it fails and consumes nothing.
func (s *scanner) plainString() ([]byte, bool) {
	if s.peek() != '"' {
		return nil, false
	}
	ascii := true
	for j := s.i + 1; j < len(s.b); j++ {
		switch b := s.b[j]; {
		case b == '"':
			raw := s.b[s.i+1 : j]
			if !ascii && !utf8.Valid(raw) {
				return nil, false
			}
			s.i = j + 1
			return raw, true
		case b == '\\' || b < 0x20:
			return nil, false
		case b >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false
}

// str reads a string value: a plain one directly, one with escapes by
// unescape, and any other (invalid UTF-8, a lone surrogate) through
// encoding/json, so that it reads exactly as there. Escapes are common (a
// line break in the text), and encoding/json goes 1.4 KB deeper than the
// scanner, under a stream's read loop, where the goroutine must stay
// under 7 KB deep to keep an 8 KB stack (issue 22).
func (s *scanner) str() (string, bool) {
	if raw, ok := s.plainString(); ok {
		return string(raw), true
	}
	start := s.i
	if !s.skipString() {
		return "", false
	}
	if v, ok := unescape(s.b[start+1 : s.i-1]); ok {
		return v, true
	}
	var v string
	if json.Unmarshal(s.b[start:s.i], &v) != nil {
		return "", false
	}
	return v, true
}

// unescape decodes the inside of a JSON string that skipString accepted.
// It gives up (false) on invalid UTF-8 and on a \u escape of a surrogate
// that is not half of a valid pair, which encoding/json replaces.
func unescape(raw []byte) (string, bool) {
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == '\\':
			if i+1 >= len(raw) {
				return "", false
			}
			switch e := raw[i+1]; e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r, ok := hex4(raw[i+2:])
				if !ok {
					return "", false
				}
				i += 6
				if utf16.IsSurrogate(r) {
					if len(raw) < i+6 || raw[i] != '\\' || raw[i+1] != 'u' {
						return "", false
					}
					r2, ok := hex4(raw[i+2:])
					if r = utf16.DecodeRune(r, r2); !ok || r == utf8.RuneError {
						return "", false
					}
					i += 6
				}
				out = utf8.AppendRune(out, r)
				continue
			default:
				return "", false
			}
			i += 2
		case c < utf8.RuneSelf:
			out = append(out, c)
			i++
		default:
			r, n := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && n == 1 {
				return "", false
			}
			out = append(out, raw[i:i+n]...)
			i += n
		}
	}
	return string(out), true
}

// hex4 reads the four hex digits of a \u escape.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// skipString consumes a valid string.
func (s *scanner) skipString() bool {
	if s.peek() != '"' {
		return false
	}
	for j := s.i + 1; j < len(s.b); j++ {
		switch b := s.b[j]; {
		case b == '"':
			s.i = j + 1
			return true
		case b < 0x20:
			return false
		case b == '\\':
			j++
			if j >= len(s.b) {
				return false
			}
			switch s.b[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if j+4 >= len(s.b) {
					return false
				}
				for _, h := range s.b[j+1 : j+5] {
					if !isHex(h) {
						return false
					}
				}
				j += 4
			default:
				return false
			}
		}
	}
	return false
}

func isHex(b byte) bool {
	return '0' <= b && b <= '9' || 'a' <= b && b <= 'f' || 'A' <= b && b <= 'F'
}

// integer reads a number with no fraction and no exponent, of at most 18
// digits, into *v when v is not nil.
func (s *scanner) integer(v *int) bool {
	s.space()
	j, neg := s.i, false
	if j < len(s.b) && s.b[j] == '-' {
		neg = true
		j++
	}
	n, digits := 0, 0
	for ; j < len(s.b) && '0' <= s.b[j] && s.b[j] <= '9'; j++ {
		if digits > 0 && n == 0 {
			return false // a leading zero
		}
		n = n*10 + int(s.b[j]-'0')
		digits++
	}
	if digits == 0 || digits > 18 || (j < len(s.b) && (s.b[j] == '.' || s.b[j] == 'e' || s.b[j] == 'E')) {
		return false
	}
	if neg {
		n = -n
	}
	if v != nil {
		*v = n
	}
	s.i = j
	return true
}

// skipNumber consumes a valid number.
func (s *scanner) skipNumber() bool {
	s.space()
	j := s.i
	if j < len(s.b) && s.b[j] == '-' {
		j++
	}
	digits := func() int {
		k := j
		for j < len(s.b) && '0' <= s.b[j] && s.b[j] <= '9' {
			j++
		}
		return j - k
	}
	switch {
	case j < len(s.b) && s.b[j] == '0':
		j++
	case digits() == 0:
		return false
	}
	if j < len(s.b) && s.b[j] == '.' {
		j++
		if digits() == 0 {
			return false
		}
	}
	if j < len(s.b) && (s.b[j] == 'e' || s.b[j] == 'E') {
		j++
		if j < len(s.b) && (s.b[j] == '+' || s.b[j] == '-') {
			j++
		}
		if digits() == 0 {
			return false
		}
	}
	s.i = j
	return true
}

// skip consumes any valid value, nested at most 16 deep.
func (s *scanner) skip(depth int) bool {
	if depth > 16 {
		return false
	}
	switch c := s.peek(); {
	case c == '"':
		return s.skipString()
	case c == '{':
		return s.object(func([]byte) bool { return s.skip(depth + 1) })
	case c == '[':
		return s.array(func() bool { return s.skip(depth + 1) })
	case c == '-' || '0' <= c && c <= '9':
		return s.skipNumber()
	}
	return s.literal("true") || s.literal("false") || s.null()
}
