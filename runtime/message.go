package runtime

import (
	"bytes"
	"encoding/json"
	"errors"
	"unicode/utf8"
)

// Message is one OpenAI chat message as kept in a transcript. A routing note
// is a system message whose Handoff is set; the marker is structured data and
// is never parsed out of text.
type Message struct {
	Role string
	// Content is the text of the message. When the client sent content as an
	// array of parts, Parts holds that array verbatim and Content the
	// concatenation of its text parts.
	Content    string
	Parts      json.RawMessage
	Name       string
	ToolCalls  []ToolCall
	ToolCallID string
	// Handoff marks a routing note. Clients cannot set it: the gateway clears
	// it on every message a request brings.
	Handoff *Marker
}

// Marker is the handoff marker carried by a routing note.
type Marker struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// ToolCall is one function call made by an assistant message.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall is the function part of a ToolCall; Arguments is JSON text.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// The roles a transcript may hold.
const (
	RoleSystem    = "system"
	RoleDeveloper = "developer"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// wireMessage is Message's JSON form.
type wireMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content,omitempty"`
	Name       string          `json:"name,omitempty"`
	ToolCalls  []ToolCall      `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	Handoff    *Marker         `json:"handoff,omitempty"`
}

var jsonNull = []byte("null")

// MarshalJSON writes the OpenAI shape: content as a string, as the client's
// array of parts, or null for an assistant message that only calls tools.
func (m Message) MarshalJSON() ([]byte, error) {
	w := wireMessage{Role: m.Role, Name: m.Name, ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID, Handoff: m.Handoff}
	switch {
	case len(m.Parts) > 0:
		w.Content = m.Parts
	case m.Content == "" && len(m.ToolCalls) > 0:
		w.Content = jsonNull
	default:
		b, err := json.Marshal(m.Content)
		if err != nil {
			return nil, err
		}
		w.Content = b
	}
	return json.Marshal(w)
}

// errBadContent is returned for content that is neither a string, an array
// of parts, nor null.
var errBadContent = errors.New("content must be a string, an array of content parts or null")

// UnmarshalJSON reads the OpenAI shape; see MarshalJSON.
func (m *Message) UnmarshalJSON(b []byte) error {
	var w WireMessage
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	return w.decode(m)
}

// WireMessage is a message as JSON carries it, its content not yet read. A
// request of many messages decodes into WireMessages in one pass and then
// reads each one's content (Message), where decoding into Messages would
// scan every message's JSON twice.
type WireMessage wireMessage

// Message returns the message w holds; errors are for content that is
// neither a string, an array of content parts, nor null.
func (w *WireMessage) Message() (Message, error) {
	var m Message
	err := w.decode(&m)
	return m, err
}

// decode sets *m to the message w holds.
func (w *WireMessage) decode(m *Message) error {
	*m = Message{Role: w.Role, Name: w.Name, ToolCalls: w.ToolCalls, ToolCallID: w.ToolCallID, Handoff: w.Handoff}
	c := bytes.TrimSpace(w.Content)
	switch {
	case len(c) == 0 || bytes.Equal(c, jsonNull):
	case c[0] == '"':
		// Most content has no escapes: then the text is the bytes between
		// the quotes (the decoder has checked the JSON already), and a
		// second decoding pass is saved. Invalid UTF-8 still goes through
		// the decoder, which replaces it.
		if raw := c[1 : len(c)-1]; bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
			m.Content = string(raw)
			return nil
		}
		// Into a string of its own: decoding into m.Content would move
		// every message Message decodes to the heap.
		var text string
		err := json.Unmarshal(c, &text)
		m.Content = text
		return err
	case c[0] == '[':
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(c, &parts); err != nil {
			return errBadContent
		}
		m.Parts = append(json.RawMessage(nil), c...)
		for _, p := range parts {
			if p.Type == "text" {
				m.Content += p.Text
			}
		}
	default:
		return errBadContent
	}
	return nil
}

// IsSystem reports whether the message is a system or developer message;
// such messages are folded into the leading system prompt (docs/handoffs.md).
func (m *Message) IsSystem() bool {
	return m.Role == RoleSystem || m.Role == RoleDeveloper
}
