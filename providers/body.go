package providers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/switchboard-ai/switchboard/internal/jsonenc"
	"github.com/switchboard-ai/switchboard/runtime"
)

// go-openai encodes the request, but each of its messages goes through
// its own MarshalJSON and encoding/json's reflection: in a long session that
// was most of what a turn's cost grew by. So the request handed to go-openai
// has an empty messages array, and the HTTP doer (attempt.Do) writes the
// messages into that array itself, appending to a pooled buffer, in the
// JSON go-openai would have written (body_test.go compares the two).

// bodyPatch completes the JSON body go-openai built for a call: it writes
// the messages, and sets the top-level fields go-openai's struct cannot
// express (zero temperature or top_p, a verbatim response_format). It is
// applied to every attempt's body.
type bodyPatch struct {
	messages runtime.Prompt
	fields   []patchField // go-openai omits each of these keys; see applyParams
}

// patchField is one top-level key set verbatim.
type patchField struct {
	key   string
	value json.RawMessage
}

// setField sets key to v.
func (p *bodyPatch) setField(key string, v json.RawMessage) {
	for i := range p.fields {
		if p.fields[i].key == key {
			p.fields[i].value = v
			return
		}
	}
	p.fields = append(p.fields, patchField{key: key, value: v})
}

// errNoMessages is returned when go-openai's body does not start with the
// model and the empty messages array, which the splice relies on.
var errNoMessages = errors.New(`body does not start with "model" and an empty "messages"`)

// build appends to dst the body to send: goBody, go-openai's body, with the
// messages in its empty messages array and the fields after it.
func (p *bodyPatch) build(dst, goBody []byte) ([]byte, error) {
	at := emptyMessagesAt(goBody)
	if at < 0 {
		return nil, errNoMessages
	}
	dst = append(dst, goBody[:at+1]...) // up to and with '['
	dst, err := appendMessages(dst, p.messages)
	if err != nil {
		return nil, err
	}
	dst = append(dst, ']')
	for _, f := range p.fields {
		if !json.Valid(f.value) {
			return nil, fmt.Errorf("%s is not valid JSON", f.key)
		}
		dst = append(jsonenc.AppendString(append(dst, ','), f.key), ':')
		dst = append(dst, f.value...)
	}
	return append(dst, goBody[at+2:]...), nil
}

// emptyMessagesAt returns the index of the '[' of the empty messages array
// in a body go-openai encoded, or -1. go-openai writes "model" first and
// "messages" second, and a JSON string holds no bare quote, so the
// array is found without parsing the rest of the body (whose tool schemas
// could hold the same bytes).
func emptyMessagesAt(body []byte) int {
	const model, messages = `{"model":"`, `,"messages":[]`
	if !bytes.HasPrefix(body, []byte(model)) {
		return -1
	}
	for i := len(model); i < len(body); i++ {
		switch body[i] {
		case '\\':
			i++ // the escaped byte cannot end the string
		case '"':
			if bytes.HasPrefix(body[i+1:], []byte(messages)) {
				return i + len(messages) - 1
			}
			return -1
		}
	}
	return -1
}

// appendMessages appends msgs as a JSON array of OpenAI chat messages: the
// keys, order and escaping go-openai's MarshalJSON gives, plus what it
// cannot say (content "" and verbatim content parts).
func appendMessages(dst []byte, msgs runtime.Prompt) ([]byte, error) {
	n := 0
	for _, run := range msgs {
		for i := range run {
			if n > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendMessage(dst, &run[i]); err != nil {
				return nil, fmt.Errorf("message %d: %w", n, err)
			}
			n++
		}
	}
	return dst, nil
}

// errBadParts is returned for content parts that are not valid JSON (they
// are copied verbatim, so they must be).
var errBadParts = errors.New("content parts are not valid JSON")

// appendMessage appends one message.
func appendMessage(dst []byte, m *runtime.Message) ([]byte, error) {
	dst = jsonenc.AppendString(append(dst, `{"role":`...), m.Role)
	switch {
	case len(m.Parts) > 0:
		// Verbatim: go-openai knows only text and image_url parts, and
		// the client's other kinds must not be lost.
		if !json.Valid(m.Parts) {
			return nil, errBadParts
		}
		dst = append(append(dst, `,"content":`...), m.Parts...)
	case m.Content != "":
		dst = jsonenc.AppendString(append(dst, `,"content":`...), m.Content)
	case m.Role == runtime.RoleAssistant && len(m.ToolCalls) > 0:
		// No content, as go-openai sends it: OpenAI and strict servers
		// accept that for an assistant message that only calls tools.
	default:
		// Servers require content on user, system and tool messages.
		dst = append(dst, `,"content":""`...)
	}
	if m.Name != "" {
		dst = jsonenc.AppendString(append(dst, `,"name":`...), m.Name)
	}
	if len(m.ToolCalls) > 0 {
		dst = append(dst, `,"tool_calls":[`...)
		for i := range m.ToolCalls {
			dst = appendToolCall(dst, &m.ToolCalls[i], i > 0)
		}
		dst = append(dst, ']')
	}
	if m.ToolCallID != "" {
		dst = jsonenc.AppendString(append(dst, `,"tool_call_id":`...), m.ToolCallID)
	}
	return append(dst, '}'), nil
}

// appendToolCall appends one tool call, after a comma when comma is set.
// The type is always "function"; an empty id or name is omitted, as
// go-openai omits it.
func appendToolCall(dst []byte, c *runtime.ToolCall, comma bool) []byte {
	if comma {
		dst = append(dst, ',')
	}
	dst = append(dst, '{')
	if c.ID != "" {
		dst = append(jsonenc.AppendString(append(dst, `"id":`...), c.ID), ',')
	}
	dst = append(dst, `"type":"function","function":{`...)
	if c.Function.Name != "" {
		dst = append(jsonenc.AppendString(append(dst, `"name":`...), c.Function.Name), ',')
	}
	args := c.Function.Arguments
	if args == "" {
		args = "{}" // servers want a string
	}
	dst = jsonenc.AppendString(append(dst, `"arguments":`...), args)
	return append(dst, "}}"...)
}

// bodyBuffers pools the buffers request bodies are built in: in a long
// session a body is tens of kilobytes, and growing a fresh one by appending
// would leave several times that as garbage every call. The zero value is
// ready to use.
type bodyBuffers struct{ pool sync.Pool }

// get returns an empty buffer.
func (p *bodyBuffers) get() *[]byte {
	if b, ok := p.pool.Get().(*[]byte); ok {
		return b
	}
	return new([]byte)
}

// put pools b.
func (p *bodyBuffers) put(b *[]byte) {
	*b = (*b)[:0]
	p.pool.Put(b)
}

// apply replaces req's body by the patched one, built in a buffer of pool
// and sent as an exact copy of it in a bytes.Reader. The copy costs one
// allocation without pointers, and is what lets net/http see the body as
// in memory: it then writes the headers and the body together, through the
// connection's buffer (see newTransport), where a body of any other type has
// its headers flushed on their own and is copied to the socket through a
// fresh 32 KB buffer. The transport may read the body after the call
// returned (and again through GetBody), so the pooled buffer cannot be
// sent itself.
func (p *bodyPatch) apply(req *http.Request, pool *bodyBuffers) error {
	if req.Body == nil {
		return errNoMessages
	}
	goBody, err := readBody(req)
	if err != nil {
		return fmt.Errorf("read request body: %w", err)
	}
	buf := pool.get()
	defer pool.put(buf)
	b, err := p.build(*buf, goBody)
	if err != nil {
		return fmt.Errorf("patch request body: %w", err)
	}
	*buf = b
	body := bytes.Clone(b)
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.ContentLength = int64(len(body))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return nil
}

// readBody reads and closes req's body, in one allocation of its length
// when that is known.
func readBody(req *http.Request) ([]byte, error) {
	defer req.Body.Close()
	if n := req.ContentLength; n > 0 {
		b := make([]byte, n)
		if _, err := io.ReadFull(req.Body, b); err != nil {
			return nil, err
		}
		return b, nil
	}
	return io.ReadAll(req.Body)
}
