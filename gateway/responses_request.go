package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/switchboard-ai/switchboard/runtime"
)

// responsesRequest is the part of a Responses API request (POST
// /v1/responses) the gateway reads. Every other field of OpenAI's request
// (reasoning, truncation, user, prompt_cache_key, ...) is accepted and
// ignored: agent SDKs send them as a matter of course.
type responsesRequest struct {
	Model              string          `json:"model"`
	Input              json.RawMessage `json:"input"`
	Instructions       *string         `json:"instructions"`
	PreviousResponseID *string         `json:"previous_response_id"`
	// Store defaults to true: the response is kept as a point of a session.
	Store             *bool                      `json:"store"`
	Stream            bool                       `json:"stream"`
	Tools             []responsesTool            `json:"tools"`
	Metadata          map[string]json.RawMessage `json:"metadata"`
	Temperature       *float64                   `json:"temperature"`
	TopP              *float64                   `json:"top_p"`
	MaxOutputTokens   *runtime.IntParam          `json:"max_output_tokens"`
	ParallelToolCalls *bool                      `json:"parallel_tool_calls"`
	Include           []string                   `json:"include"`
	// ToolChoice is Responses-shaped: "auto", {"type": "function", "name"},
	// {"type": "allowed_tools", "mode", "tools"}.
	ToolChoice json.RawMessage `json:"tool_choice"`
	Text       *struct {
		Format json.RawMessage `json:"format"`
	} `json:"text"`
	// Approvals decide pending approvals of the session the request goes
	// on in, as in a chat request (docs/permissions.md).
	Approvals []approvalDecision `json:"approvals"`

	// Decoded from the above by decodeResponsesRequest.
	messages []runtime.Message
}

// responsesTool is a tool of a Responses request: function tools are flat,
// {type, name, description, parameters, strict}.
type responsesTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description *string         `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
}

// includeHandoffs is the include value that asks for handoff items and
// events (docs/http-api.md): opt-in, because clients that validate event types
// reject what they do not know.
const includeHandoffs = "switchboard:handoffs"

// decodeResponsesRequest reads and checks a Responses request body.
func decodeResponsesRequest(body []byte) (*responsesRequest, *Error) {
	var req responsesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, responsesBodyError(err)
	}
	if req.Model == "" {
		return nil, badRequest("model", "model is required")
	}
	msgs, e := decodeInput(req.Input)
	if e != nil {
		return nil, e
	}
	if len(msgs) == 0 && (req.PreviousResponseID == nil || *req.PreviousResponseID == "") {
		// Only a request that continues a response (one paused for
		// approvals) may bring no input; the run says whether it was paused.
		return nil, badRequest("input", "input must be a non-empty string or a non-empty list of items")
	}
	if e := checkDecisions(req.Approvals); e != nil {
		return nil, e
	}
	if e := checkMetadata(req.Metadata); e != nil {
		return nil, e
	}
	if req.Text != nil {
		if e := checkFormat(req.Text.Format, "text.format", ""); e != nil {
			return nil, e
		}
	}
	if req.Instructions != nil && *req.Instructions != "" && len(msgs) > 0 {
		// With no input (a paused response continued) they would be the
		// request's only new input, and a session request without a
		// paused run would go on with nothing new: skipped.
		// Instructions are the client's context, kept like a client system
		// message (after the agent's own instructions), placed where the
		// request's new input starts so that a session keeps them.
		at := 0
		for i := len(msgs) - 1; i >= 0; i-- {
			if msgs[i].Role == runtime.RoleAssistant {
				at = i + 1
				break
			}
		}
		msgs = slices.Insert(msgs, at, runtime.Message{Role: runtime.RoleSystem, Content: *req.Instructions})
	}
	req.messages = msgs
	for i, t := range req.Tools {
		if t.Type != "function" || t.Name == "" {
			return nil, badRequest(fmt.Sprintf("tools[%d]", i), "tools[%d]: only function tools with a name are supported (got type %q)", i, t.Type)
		}
		if e := checkToolName(t.Name, fmt.Sprintf("tools[%d].name", i)); e != nil {
			return nil, e
		}
	}
	return &req, nil
}

// responsesBodyError maps a body that does not decode; a field of the
// wrong type is named as the client wrote it.
func responsesBodyError(err error) *Error {
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &te) && te.Field == "":
		return badRequest("", "the request body must be a JSON object, not a JSON %s", te.Value)
	case errors.As(err, &te):
		return badRequest(te.Field, "%s must be %s, not a JSON %s", te.Field, jsonKind(te.Type), te.Value)
	default:
		return badRequest("", "the request body is not valid JSON: %v", err)
	}
}

// stored reports whether the response is to be stored (store defaults to
// true).
func (req *responsesRequest) stored() bool { return req.Store == nil || *req.Store }

// includes reports whether include names v.
func (req *responsesRequest) includes(v string) bool { return slices.Contains(req.Include, v) }

// clientTools returns the request's function tools as tool definitions.
func (req *responsesRequest) clientTools() []runtime.ToolDef {
	if len(req.Tools) == 0 {
		return nil
	}
	out := make([]runtime.ToolDef, len(req.Tools))
	for i, t := range req.Tools {
		out[i] = runtime.ToolDef{Name: t.Name, Parameters: t.Parameters, Strict: t.Strict != nil && *t.Strict}
		if t.Description != nil {
			out[i].Description = *t.Description
		}
	}
	return out
}

// params maps the request's sampling parameters to a provider call's.
func (req *responsesRequest) params() *runtime.Params {
	p := &runtime.Params{
		Temperature:         req.Temperature,
		TopP:                req.TopP,
		MaxCompletionTokens: req.MaxOutputTokens,
		ParallelToolCalls:   req.ParallelToolCalls,
	}
	if req.Text != nil {
		p.ResponseFormat = responseFormat(req.Text.Format)
	}
	return p
}

// toolChoice maps tool_choice to the Chat Completions shape the run reads
// (a name moves into "function"); a shape it does not know is passed as it
// is, for the run to refuse by name.
func (req *responsesRequest) toolChoice() json.RawMessage {
	raw := bytes.TrimSpace(req.ToolChoice)
	if len(raw) == 0 || raw[0] != '{' {
		return raw
	}
	type named struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	var c struct {
		named
		Mode  string  `json:"mode"`
		Tools []named `json:"tools"`
	}
	if json.Unmarshal(raw, &c) != nil {
		return raw
	}
	fn := func(n named) map[string]any {
		return map[string]any{"type": "function", "function": map[string]any{"name": n.Name}}
	}
	var out any
	switch c.Type {
	case "function":
		out = fn(c.named)
	case "allowed_tools":
		tools := make([]any, 0, len(c.Tools))
		for _, t := range c.Tools {
			if t.Type != "function" {
				return raw
			}
			tools = append(tools, fn(t))
		}
		out = map[string]any{"type": "allowed_tools", "allowed_tools": map[string]any{"mode": c.Mode, "tools": tools}}
	default:
		return raw
	}
	b, err := json.Marshal(out)
	if err != nil {
		return raw
	}
	return b
}

// responseFormat maps text.format to Chat Completions' response_format:
// json_schema and json_object are passed on, plain text (the default) is
// not sent.
func responseFormat(format json.RawMessage) json.RawMessage {
	var f struct {
		Type   string          `json:"type"`
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Strict *bool           `json:"strict"`
		Desc   string          `json:"description"`
	}
	if len(format) == 0 || json.Unmarshal(format, &f) != nil {
		return nil
	}
	var out any
	switch f.Type {
	case "json_object":
		out = map[string]any{"type": "json_object"}
	case "json_schema":
		js := map[string]any{"name": f.Name, "schema": f.Schema}
		if f.Strict != nil {
			js["strict"] = *f.Strict
		}
		if f.Desc != "" {
			js["description"] = f.Desc
		}
		out = map[string]any{"type": "json_schema", "json_schema": js}
	default:
		return nil
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil
	}
	return b
}

// metadata is the request's metadata flattened to strings, as enabled_when
// compares them and as the reply echoes them.
func (req *responsesRequest) metadata() map[string]string {
	return flattenMetadata(req.Metadata)
}

// inputItem is one item of a Responses input list, any of the kinds the
// gateway takes.
type inputItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

// decodeInput turns a request's input (a string, or a list of items) into
// transcript messages: messages keep their role, function_call items become
// an assistant message's tool calls (consecutive calls join one message),
// function_call_output items become tool messages.
func decodeInput(raw json.RawMessage) ([]runtime.Message, *Error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || bytes.Equal(raw, []byte("null")):
		return nil, nil
	case raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, badRequest("input", "input: %v", err)
		}
		if s == "" {
			return nil, nil
		}
		return []runtime.Message{{Role: runtime.RoleUser, Content: s}}, nil
	case raw[0] != '[':
		return nil, badRequest("input", "input must be a string or a list of items")
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, badRequest("input", "input: %v", err)
	}
	msgs := make([]runtime.Message, 0, len(items))
	for i, rawItem := range items {
		param := fmt.Sprintf("input[%d]", i)
		var it inputItem
		if err := json.Unmarshal(rawItem, &it); err != nil {
			return nil, badRequest(param, "%s must be an item object: %v", param, err)
		}
		switch it.Type {
		case "", "message":
			m, e := decodeMessageItem(&it, param)
			if e != nil {
				return nil, e
			}
			msgs = append(msgs, m)
		case "function_call":
			if it.CallID == "" || it.Name == "" {
				return nil, badRequest(param, "%s: a function_call item needs call_id and name", param)
			}
			call := runtime.ToolCall{ID: it.CallID, Type: "function", Function: runtime.FunctionCall{Name: it.Name, Arguments: it.Arguments}}
			if n := len(msgs); n > 0 && msgs[n-1].Role == runtime.RoleAssistant {
				// A message and the calls that follow it are one turn.
				msgs[n-1].ToolCalls = append(msgs[n-1].ToolCalls, call)
				continue
			}
			msgs = append(msgs, runtime.Message{Role: runtime.RoleAssistant, ToolCalls: []runtime.ToolCall{call}})
		case "function_call_output":
			if it.CallID == "" {
				return nil, badRequest(param, "%s: a function_call_output item needs call_id", param)
			}
			text, e := callOutputText(it.Output, param+".output")
			if e != nil {
				return nil, e
			}
			msgs = append(msgs, runtime.Message{Role: runtime.RoleTool, ToolCallID: it.CallID, Content: text})
		case "switchboard:handoff":
			// The gateway's own output item (include: switchboard:handoffs),
			// replayed by a client that sends output back as input, as
			// agent SDKs do: a record of what happened, not input. Which
			// agent holds a conversation is never the client's to say.
			continue
		default:
			return nil, badRequest(param+".type", "%s: unsupported item type %q (supported: message, function_call, function_call_output)", param, it.Type)
		}
	}
	return msgs, nil
}

// decodeMessageItem reads a message item: role user, system, developer or
// assistant; content a string or a list of text parts (input_text,
// output_text) and, from a user, input_image parts.
func decodeMessageItem(it *inputItem, param string) (runtime.Message, *Error) {
	m := runtime.Message{Role: it.Role}
	switch it.Role {
	case runtime.RoleUser, runtime.RoleSystem, runtime.RoleDeveloper, runtime.RoleAssistant:
	case "":
		return m, badRequest(param+".role", "%s: role is required", param)
	default:
		return m, badRequest(param+".role", "%s: unknown role %q (allowed: user, system, developer, assistant)", param, it.Role)
	}
	c := bytes.TrimSpace(it.Content)
	switch {
	case len(c) == 0 || bytes.Equal(c, []byte("null")):
		return m, badRequest(param+".content", "%s: content is required", param)
	case c[0] == '"':
		if err := json.Unmarshal(c, &m.Content); err != nil {
			return m, badRequest(param+".content", "%s.content: %v", param, err)
		}
		return m, nil
	case c[0] != '[':
		return m, badRequest(param+".content", "%s.content must be a string or a list of content parts", param)
	}
	var parts []contentPart
	if err := json.Unmarshal(c, &parts); err != nil {
		return m, badRequest(param+".content", "%s.content must be a list of content parts: %v", param, err)
	}
	if len(parts) == 0 && it.Role == runtime.RoleUser {
		return m, badRequest(param+".content", "%s: a user message needs content (a string or a non-empty list of content parts)", param)
	}
	var text strings.Builder
	var chatParts []map[string]any // only when an image makes parts necessary
	for j, p := range parts {
		pparam := fmt.Sprintf("%s.content[%d]", param, j)
		switch {
		case p.Type == "input_text" || p.Type == "output_text" || p.Type == "text":
			text.WriteString(p.Text)
			chatParts = append(chatParts, map[string]any{"type": "text", "text": p.Text})
		case p.Type == "refusal" && it.Role == runtime.RoleAssistant:
			text.WriteString(p.Refusal)
			chatParts = append(chatParts, map[string]any{"type": "text", "text": p.Refusal})
		case p.Type == "input_image" && it.Role == runtime.RoleUser:
			if p.ImageURL == "" {
				return m, badRequest(pparam, "%s: an input_image needs an image_url (file ids are not supported)", pparam)
			}
			img := map[string]any{"url": p.ImageURL}
			if p.Detail != "" {
				img["detail"] = p.Detail
			}
			chatParts = append(chatParts, map[string]any{"type": "image_url", "image_url": img})
		default:
			return m, badRequest(pparam, "%s: unsupported content part %q in a %s message", pparam, p.Type, it.Role)
		}
	}
	m.Content = text.String()
	if slices.ContainsFunc(chatParts, func(p map[string]any) bool { return p["type"] != "text" }) {
		b, err := json.Marshal(chatParts)
		if err != nil {
			return m, badRequest(param+".content", "%s.content: %v", param, err)
		}
		m.Parts = b
	}
	return m, nil
}

// contentPart is a part of a message item's content list, any of the kinds
// the gateway takes.
type contentPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Refusal  string `json:"refusal"`
	ImageURL string `json:"image_url"`
	Detail   string `json:"detail"`
}

// callOutputText reads a function_call_output's output: a string, or a list of
// text parts whose texts are joined.
func callOutputText(raw json.RawMessage, param string) (string, *Error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || bytes.Equal(raw, []byte("null")):
		return "", badRequest(param, "%s is required", param)
	case raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", badRequest(param, "%s: %v", param, err)
		}
		return s, nil
	case raw[0] == '[':
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(raw, &parts); err != nil {
			return "", badRequest(param, "%s: %v", param, err)
		}
		var b strings.Builder
		for j, p := range parts {
			if p.Type != "input_text" && p.Type != "output_text" && p.Type != "text" {
				return "", badRequest(fmt.Sprintf("%s[%d]", param, j), "%s[%d]: unsupported output part %q", param, j, p.Type)
			}
			b.WriteString(p.Text)
		}
		return b.String(), nil
	default:
		return "", badRequest(param, "%s must be a string or a list of text parts", param)
	}
}
