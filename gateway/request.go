package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/runtime"
)

// chatRequest is the part of an OpenAI Chat Completions request the gateway
// reads; sampling parameters are passed on to every provider call.
type chatRequest struct {
	Model string `json:"model"`
	// Wire holds the messages as decoded, Messages what they say.
	Wire          []runtime.WireMessage `json:"messages"`
	Messages      []runtime.Message     `json:"-"`
	Stream        bool                  `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Tools    []clientTool               `json:"tools"`
	Metadata map[string]json.RawMessage `json:"metadata"`
	// ToolChoice is checked by the run, which knows the agent's tools.
	ToolChoice json.RawMessage `json:"tool_choice"`
	// Approvals decide pending approvals of the session (docs/permissions.md).
	Approvals []approvalDecision `json:"approvals"`
	// N is only read to refuse a value that is not an integer: the reply
	// always holds one choice.
	N *runtime.IntParam `json:"n"`
	runtime.Params
}

// clientTool is one tool of the request.
type clientTool struct {
	Type     string           `json:"type"`
	Function *runtime.ToolDef `json:"function"`
}

// decodeChatRequest reads and checks a request body: bad JSON, no messages or malformed messages are answered before any run.
//
// encoding/json goes deep (4 KB for a message's content), and a stream's
// goroutine must never pass 7 KB to keep its 8 KB stack (issue 22): so the
// decode happens in unmarshalChat, whose frame is small, and the checks,
// whose frame is not, once it has returned. The most common requests
// are decoded without encoding/json (fastChat), to the same result.
func decodeChatRequest(body []byte) (*chatRequest, *Error) {
	if req, ok := fastChat(body); ok {
		return checkChatRequest(req, nil)
	}
	req, err := unmarshalChat(body)
	return checkChatRequest(req, err)
}

// unmarshalChat decodes a request body.
func unmarshalChat(body []byte) (*chatRequest, error) {
	req := new(chatRequest)
	return req, json.Unmarshal(body, req)
}

// checkChatRequest checks a decoded request body, err what decoding it
// returned.
//
//go:noinline
func checkChatRequest(r *chatRequest, err error) (*chatRequest, *Error) {
	req := r
	if err != nil {
		// A field of the wrong type is named as the client wrote it, not
		// by the Go struct it would have filled.
		var te *json.UnmarshalTypeError
		var se *json.SyntaxError
		switch {
		case errors.As(err, &te) && te.Field == "":
			return nil, badRequest("", "the request body must be a JSON object, not a JSON %s", te.Value)
		case errors.As(err, &te):
			field := strings.TrimPrefix(te.Field, "Params.") // the embedded sampling parameters
			return nil, badRequest(field, "%s must be %s, not a JSON %s", field, jsonKind(te.Type), te.Value)
		case errors.As(err, &se), errors.Is(err, io.ErrUnexpectedEOF):
			return nil, badRequest("", "the request body is not valid JSON: %v", err)
		default: // a field's own decoder refused its value
			return nil, badRequest("", "invalid request body: %v", err)
		}
	}
	if req.Wire != nil {
		req.Messages = make([]runtime.Message, len(req.Wire))
		for i := range req.Wire {
			m, err := req.Wire[i].Message()
			if err != nil {
				return nil, badRequest(fmt.Sprintf("messages[%d].content", i), "messages[%d]: %v", i, err)
			}
			if m.Role == runtime.RoleUser && noContent(req.Wire[i].Content) {
				// OpenAI refuses it; a provider that took it would answer
				// nothing in particular.
				return nil, badRequest(fmt.Sprintf("messages[%d].content", i), "messages[%d]: a user message needs content (a string or a non-empty array of content parts)", i)
			}
			req.Messages[i] = m
		}
		req.Wire = nil
	}
	if req.Model == "" {
		return nil, badRequest("model", "model is required")
	}
	if e := checkMessages(req.Messages); e != nil {
		return nil, e
	}
	if e := checkDecisions(req.Approvals); e != nil {
		return nil, e
	}
	if e := checkMetadata(req.Metadata); e != nil {
		return nil, e
	}
	if e := checkParams(&req.Params); e != nil {
		return nil, e
	}
	for i, t := range req.Tools {
		if t.Type != "function" || t.Function == nil || t.Function.Name == "" {
			return nil, badRequest(fmt.Sprintf("tools[%d]", i), "tools[%d] must be a function tool with a name", i)
		}
		if e := checkToolName(t.Function.Name, fmt.Sprintf("tools[%d].function.name", i)); e != nil {
			return nil, e
		}
	}
	return req, nil
}

// checkToolName refuses a client tool's name that providers refuse: left
// to them, their 400 would come back as a 502, which OpenAI's SDKs retry.
// It is the pattern config tool names are held to.
func checkToolName(name, param string) *Error {
	if graphs.ValidToolName(name) {
		return nil
	}
	return badRequest(param, "%s must match ^[a-zA-Z0-9_-]{1,64}$ (1 to 64 letters, digits, _ or -)", param)
}

// noContent reports whether a message's content is absent, null or an
// empty array of parts. (An empty string is content: OpenAI takes it.)
func noContent(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || bytes.Equal(raw, []byte("null")):
		return true
	case raw[0] == '[':
		return len(bytes.TrimSpace(raw[1:len(raw)-1])) == 0
	}
	return false
}

// jsonKind names the JSON values a Go type decodes from.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeFor[runtime.StopSequences]() {
		return "a string or an array of strings"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	default:
		return "an object"
	}
}

// checkMessages validates the request's messages and clears any handoff
// marker: markers are the gateway's own data, never the client's.
func checkMessages(msgs []runtime.Message) *Error {
	for i := range msgs {
		m := &msgs[i]
		m.Handoff = nil
		// The message's name in an error, made only for one.
		param := func() string { return "messages[" + strconv.Itoa(i) + "]" }
		switch m.Role {
		case runtime.RoleSystem, runtime.RoleDeveloper, runtime.RoleUser:
			if len(m.ToolCalls) > 0 {
				return badRequest(param(), "%s: only assistant messages may carry tool_calls", param())
			}
		case runtime.RoleAssistant:
			for j, c := range m.ToolCalls {
				if c.ID == "" || c.Function.Name == "" || (c.Type != "" && c.Type != "function") {
					return badRequest(param(), "%s.tool_calls[%d] needs an id, type function and a function name", param(), j)
				}
				if c.Type == "" {
					m.ToolCalls[j].Type = "function"
				}
			}
		case runtime.RoleTool:
			if m.ToolCallID == "" {
				return badRequest(param(), "%s: a tool message needs tool_call_id", param())
			}
		case "":
			return badRequest(param(), "%s: role is required", param())
		default:
			return badRequest(param(), "%s: unknown role %q (allowed: system, developer, user, assistant, tool)", param(), m.Role)
		}
	}
	return nil
}

// metadata flattens the request's metadata to strings, as enabled_when
// compares them: "pro", 3 and true become "pro", "3" and "true".
func (req *chatRequest) metadata() map[string]string {
	return flattenMetadata(req.Metadata)
}

// clientTools returns the request's tools as tool definitions.
func (req *chatRequest) clientTools() []runtime.ToolDef {
	if len(req.Tools) == 0 {
		return nil
	}
	out := make([]runtime.ToolDef, len(req.Tools))
	for i, t := range req.Tools {
		out[i] = *t.Function
	}
	return out
}

// validSessionID reports whether id is 1-128 of A-Za-z0-9._:-.
func validSessionID(id string) bool {
	if len(id) == 0 || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

// approvalDecision is one item of a chat request's `approvals`, and the body
// of POST /v1/sessions/{id}/approvals/{approvalId} (without its id).
type approvalDecision struct {
	ID       string `json:"id"`
	Approve  *bool  `json:"approve"`
	Reason   string `json:"reason"`
	Remember bool   `json:"remember"`
}

// checkDecisions refuses a request's `approvals` item without an id or a
// boolean approve, before anything runs.
func checkDecisions(ds []approvalDecision) *Error {
	for i, d := range ds {
		if d.ID == "" || d.Approve == nil {
			return badRequest(fmt.Sprintf("approvals[%d]", i), "approvals[%d] needs an id and approve (true or false)", i)
		}
	}
	return nil
}

// decisions returns a request's approvals for the runtime.
func decisions(ds []approvalDecision) []runtime.Decision {
	var out []runtime.Decision
	for _, d := range ds {
		out = append(out, runtime.Decision{ID: d.ID, Approve: *d.Approve, Reason: d.Reason, Remember: d.Remember})
	}
	return out
}
