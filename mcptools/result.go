package mcptools

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-ai/switchboard/runtime"
)

// MaxResultBytes bounds the text of one tool result (CONTRACT §14): a longer
// one fails the call rather than being cut.
const MaxResultBytes = 1 << 20

// ErrResultTooLarge is returned for a result over MaxResultBytes.
var ErrResultTooLarge = runtime.ErrResultTooLarge

// resultText turns a tool's result into the text the model sees: its text
// parts joined by newlines, then its structured content as JSON unless a
// text part already carries exactly that JSON (the spec asks servers to
// send both). Parts that are not text are named, not inlined: an image's
// bytes mean nothing to a chat model. A result with isError set is an
// error whose message is that same text.
func resultText(res *mcp.CallToolResult) (string, error) {
	var parts []string
	for _, c := range res.Content {
		if s := contentText(c); s != "" {
			parts = append(parts, s)
		}
	}
	if res.StructuredContent != nil {
		js, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return "", fmt.Errorf("structured content: %w", err)
		}
		if !anyJSONEqual(parts, js) {
			parts = append(parts, string(js))
		}
	}
	n := len(parts) - 1
	for _, p := range parts {
		n += len(p)
	}
	if n > MaxResultBytes {
		return "", fmt.Errorf("%w (%d bytes, at most %d)", ErrResultTooLarge, n, MaxResultBytes)
	}
	text := strings.Join(parts, "\n")
	if res.IsError {
		if text == "" {
			text = "the tool reported an error"
		}
		return "", &ToolError{Message: text}
	}
	return text, nil
}

// ToolError is a result the server marked isError: the tool ran and failed.
type ToolError struct {
	// Message is the server's text.
	Message string
}

// Error returns the server's text.
func (e *ToolError) Error() string { return e.Message }

// contentText is the text of one content part.
func contentText(c mcp.Content) string {
	switch c := c.(type) {
	case *mcp.TextContent:
		return c.Text
	case *mcp.EmbeddedResource:
		if r := c.Resource; r != nil {
			if r.Text != "" {
				return r.Text
			}
			return fmt.Sprintf("[resource %s (%s, %d bytes)]", r.URI, orUnknown(r.MIMEType), len(r.Blob))
		}
	case *mcp.ResourceLink:
		return fmt.Sprintf("[resource link %s: %s]", c.URI, c.Name)
	case *mcp.ImageContent:
		return fmt.Sprintf("[image (%s, %d bytes)]", orUnknown(c.MIMEType), len(c.Data))
	case *mcp.AudioContent:
		return fmt.Sprintf("[audio (%s, %d bytes)]", orUnknown(c.MIMEType), len(c.Data))
	}
	return ""
}

func orUnknown(mime string) string {
	if mime == "" {
		return "unknown type"
	}
	return mime
}

// anyJSONEqual reports whether one of parts is the same JSON value as js,
// whatever the order of its keys.
func anyJSONEqual(parts []string, js []byte) bool {
	var want any
	if json.Unmarshal(js, &want) != nil {
		return false
	}
	for _, p := range parts {
		var got any
		if json.Unmarshal([]byte(p), &got) == nil && reflect.DeepEqual(got, want) {
			return true
		}
	}
	return false
}
