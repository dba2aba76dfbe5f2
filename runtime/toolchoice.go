package runtime

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
)

// docs/http-api.md: the request's tool_choice applies to the run's first model
// call; later calls use "auto", so that an agent told to call a tool can
// still hand off afterwards.

// autoChoice is what the run's later calls send when the client gave a
// tool_choice.
var autoChoice = json.RawMessage(`"auto"`)

// toolChoice is a request's tool_choice, read.
type toolChoice struct {
	raw      json.RawMessage // as the client wrote it, compacted; nil when none was given
	required bool            // "required": the model must call some tool
	none     bool            // "none": the model must call no tool
	names    []string        // the functions it names (a named function, allowed_tools)
}

// parseToolChoice reads "none", "auto", "required", a named function
// {"type": "function", "function": {"name": ...}}, or OpenAI's
// {"type": "allowed_tools", "allowed_tools": {"mode": ..., "tools": [...]}}
// whose tools are named functions. JSON null is no choice.
func parseToolChoice(raw json.RawMessage) (toolChoice, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return toolChoice{}, nil
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return toolChoice{}, paramError("tool_choice", "tool_choice is not valid JSON: %v", err)
	}
	c := toolChoice{raw: compact.Bytes()}
	var mode string
	if json.Unmarshal(raw, &mode) == nil {
		switch mode {
		case "auto":
		case "none":
			c.none = true
		case "required":
			c.required = true
		default:
			return c, paramError("tool_choice", "tool_choice %q is not one of none, auto, required or a named function", mode)
		}
		return c, nil
	}
	type name struct {
		Name string `json:"name"`
	}
	type function struct {
		Type     string `json:"type"`
		Function name   `json:"function"`
	}
	// Not embedding function: an error's field path would name it.
	var obj struct {
		Type         string `json:"type"`
		Function     name   `json:"function"`
		AllowedTools struct {
			Mode  string     `json:"mode"`
			Tools []function `json:"tools"`
		} `json:"allowed_tools"`
	}
	if raw[0] != '{' {
		return c, paramError("tool_choice", "tool_choice must be a string or an object")
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		// Named as the client wrote it, not by the Go struct it would fill.
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return c, paramError("tool_choice", "tool_choice.%s is of the wrong type (a JSON %s)", te.Field, te.Value)
		}
		return c, paramError("tool_choice", "tool_choice must be a string or an object")
	}
	fns := []function{{Type: obj.Type, Function: obj.Function}}
	if obj.Type == "allowed_tools" {
		fns = obj.AllowedTools.Tools
		if m := obj.AllowedTools.Mode; m != "auto" && m != "required" {
			return c, paramError("tool_choice", "tool_choice.allowed_tools.mode must be auto or required, not %q", m)
		}
		if len(fns) == 0 {
			return c, paramError("tool_choice", "tool_choice.allowed_tools.tools must name at least one function")
		}
	}
	for _, f := range fns {
		if f.Type != "function" || f.Function.Name == "" {
			return c, paramError("tool_choice", "tool_choice must name a function tool: {\"type\": \"function\", \"function\": {\"name\": ...}}")
		}
		c.names = append(c.names, f.Function.Name)
	}
	return c, nil
}

// checkToolChoice reads the request's tool_choice and checks it against
// the tools the active agent is offered: a function it is not offered, or
// "required" with nothing to call, cannot be honoured.
func (rn *run) checkToolChoice() error {
	c, err := parseToolChoice(rn.req.ToolChoice)
	if err != nil {
		return err
	}
	offered := rn.offered()
	if c.required && len(offered) == 0 {
		return paramError("tool_choice", "tool_choice is required, but agent %q is offered no tools", rn.agent.Name)
	}
	for _, name := range c.names {
		if !offers(offered, name) {
			return paramError("tool_choice", "tool_choice names function %q, which agent %q is not offered", name, rn.agent.Name)
		}
	}
	rn.choice = c
	return nil
}

// choiceFor is the tool_choice a model call offering tools sends: the
// client's on the run's first call, "auto" on later ones, nothing when the
// client gave none or no tool is offered (a provider refuses tool_choice
// without tools). A first call made by another agent than the one checked
// (a handoff that waited for client tool results) sends "auto" when it is
// not offered what the choice names.
func (rn *run) choiceFor(tools []ToolDef, step int) json.RawMessage {
	c := rn.choice
	if c.raw == nil || len(tools) == 0 {
		return nil
	}
	if step != 1 {
		return autoChoice
	}
	for _, name := range c.names {
		if !offers(tools, name) {
			return autoChoice
		}
	}
	return c.raw
}

// allowedCalls holds a model's answer to the tool_choice it was sent: a
// call the choice does not allow ("none": any; a named function or
// allowed_tools: one it does not name) is dropped, as the Open Responses
// specification asks of a server ("rejected or suppressed"), since a
// provider that ignores tool_choice (a local model) may make it. Only the
// run's first call carries the client's choice; later ones send "auto".
func (rn *run) allowedCalls(resp *ChatResponse) {
	c, call := rn.choice, &rn.model
	calls := resp.Message.ToolCalls
	if len(calls) == 0 || c.raw == nil || call.Step != 1 || !bytes.Equal(call.Request.ToolChoice, c.raw) || (!c.none && len(c.names) == 0) {
		return
	}
	kept := calls[:0:0]
	for _, tc := range calls {
		if !c.none && slices.Contains(c.names, tc.Function.Name) {
			kept = append(kept, tc)
			continue
		}
		rn.log.Warn("a tool call the request's tool_choice does not allow was dropped",
			"agent", rn.agent.Name, "tool", tc.Function.Name, "tool_choice", string(c.raw))
	}
	resp.Message.ToolCalls = kept
	if len(kept) == 0 && resp.FinishReason == "tool_calls" {
		resp.FinishReason = "stop"
	}
}

// offers reports whether tools holds a function named name.
func offers(tools []ToolDef, name string) bool {
	return slices.ContainsFunc(tools, func(t ToolDef) bool { return t.Name == name })
}
