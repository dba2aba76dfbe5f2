package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/switchboard-ai/switchboard/graphs"
)

// ToolRunner runs server-side tools. A runner serves one or more kinds of
// tool (graphs.ToolKind); ToolKinds dispatches each call to the runner of
// its kind, as caddy's reverse proxy picks its transport by config.
type ToolRunner interface {
	// Run runs the call's tool with the call's JSON arguments
	// (call.Call.Function.Arguments) and returns its result text. Any
	// error is reported to the model as tool_failed with the error's text.
	Run(ctx context.Context, call *ToolInvocation) (string, error)
}

// ToolKinds is the dispatching ToolRunner: one runner per kind of tool.
// A new kind of tool (MCP, agent, memory) is a new entry, not a new branch.
type ToolKinds map[graphs.ToolKind]ToolRunner

var _ ToolRunner = ToolKinds(nil)

// errNoRunner is returned for a tool whose kind has no runner.
var errNoRunner = errors.New("no runner for this kind of tool")

// Run runs the call with the runner of its tool's kind.
func (k ToolKinds) Run(ctx context.Context, call *ToolInvocation) (string, error) {
	r, ok := k[call.Tool.Kind]
	if !ok {
		return "", fmt.Errorf("%w: %q", errNoRunner, call.Tool.Kind)
	}
	return r.Run(ctx, call)
}

// ToolCodeError is a tool error with a code of its own (docs/handoffs.md):
// a runner returns it for a call the model should read as that code rather
// than as tool_failed (a memory fact too_large, arguments that are not
// what the tool takes).
type ToolCodeError struct {
	Code    string
	Message string
}

func (e *ToolCodeError) Error() string { return e.Code + ": " + e.Message }

// ErrResultTooLarge is returned by a tool runner for a result over its
// bound; the model reads "result too large" as a tool_failed message.
var ErrResultTooLarge = errors.New("result too large")

// EndRunError is a runner's error that ends the run instead of being
// reported to the model: a sub-agent's run that hit max_steps or the
// budget, or whose provider failed, fails its caller's run the same way.
type EndRunError struct{ Err error }

// Error implements error.
func (e *EndRunError) Error() string { return e.Err.Error() }

// Unwrap returns the cause, which the gateway maps to a status.
func (e *EndRunError) Unwrap() error { return e.Err }

// toolBase is the innermost ToolFunc: a refusal decided by the run, a
// handoff's validation, or the tool's runner. A runner's error becomes the
// tool_failed result the model reads.
func toolBase(ctx context.Context, call *ToolInvocation) (ToolResult, error) {
	rn := call.rn
	switch {
	case call.Refusal != nil:
		return ToolError(call.Refusal.Code, call.Refusal.Message), nil
	case call.Handoff != nil:
		return rn.considerHandoff(call), nil
	}
	var out string
	var err error
	if rn.opts.Tools == nil {
		err = errors.New("no tool runner configured")
	} else {
		out, err = rn.opts.Tools.Run(ctx, call)
	}
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			// The run is over (client gone); this is not the tool's fault.
			return ToolResult{}, err
		}
		if end := (*EndRunError)(nil); errors.As(err, &end) {
			return ToolResult{}, end.Err
		}
		if h := (*subagentHold)(nil); errors.As(err, &h) {
			return ToolResult{Suspend: SuspendApproval, Data: h}, nil
		}
		if ce := (*ToolCodeError)(nil); errors.As(err, &ce) {
			res := ToolError(ce.Code, ce.Message)
			res.Err = err
			return res, nil
		}
		res := ToolError(codeToolFailed, fmt.Sprintf("tool %q failed: %v", call.Tool.Name, err))
		res.Err = err
		return res, nil
	}
	return ToolResult{Content: out}, nil
}

// ToolSource offers agents tools that are not in the config but known only
// at run time, as an MCP server's are once the gateway has listed them.
// Their calls go to the ToolRunner of their kind like any other.
type ToolSource interface {
	// Tools returns the tools agent is offered now besides its own. A
	// source leaves out any whose name the agent already uses. Callers do
	// not change the slice.
	Tools(agent *graphs.Agent) []*graphs.Tool
}

// agentTools returns the current agent's server tools: its own, then its
// ToolSource's. They are read once per agent's turn at the run, so that what
// a model was offered is what its calls find.
func (rn *run) agentTools() []*graphs.Tool {
	if rn.tools != nil {
		return rn.tools
	}
	tools := slices.Clip(rn.agent.Tools) // appending copies: agents are shared
	if src := rn.opts.ToolSource; src != nil {
		for _, t := range src.Tools(rn.agent) {
			// A memory tool of the graph keeps its name.
			if rn.memoryTool(t.Name) == nil {
				tools = append(tools, t)
			}
		}
	}
	rn.tools = tools
	if rn.tools == nil {
		rn.tools = []*graphs.Tool{} // read: none
	}
	return rn.tools
}
