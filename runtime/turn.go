package runtime

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/switchboard-ai/switchboard/graphs"
)

// callKind tells how the run treats one tool call of a model turn.
type callKind int

const (
	callUnknown  callKind = iota // a name the agent was not offered
	callServer                   // a server-side tool of the agent
	callHandoff                  // an enabled handoff
	callDisabled                 // a handoff that enabled_when disables
	callClient                   // a tool of the request
)

// Tool error codes (CONTRACT §4.3), also the outcomes of refused handoffs.
const (
	codeInvalidArgs   = "invalid_args"
	codeLimitExceeded = "limit_exceeded"
	codeExtraInTurn   = "extra_in_turn"
	codeDenied        = "denied"
	codeUnknownTool   = "unknown_tool"
	codeToolFailed    = "tool_failed"
	outcomeAccepted   = "accepted"
)

// turnOutcome is what a model turn's tool calls lead to.
type turnOutcome struct {
	// clientCalls are the client's tool calls: the run stops and returns
	// them in message.
	clientCalls []ToolCall
	message     Message
	// handoff is the accepted handoff of the turn, already written to the
	// transcript; the run switches to its target.
	handoff *graphs.Handoff
}

// classified is one tool call with what it refers to.
type classified struct {
	call    ToolCall
	kind    callKind
	tool    *graphs.Tool
	handoff *graphs.Handoff
	result  string // the tool result to write
	write   bool
}

// turn runs the tool calls of one model turn (CONTRACT §4.3): server tools
// run, the first handoff call is considered and every other one refused,
// results are appended in the model's order, the accepted handoff's result
// last. When the turn calls client tools the run stops for their results,
// and an accepted handoff waits for them: it is taken up again by resume.
func (rn *run) turn(ctx context.Context, calls []ToolCall) (turnOutcome, error) {
	var out turnOutcome
	cs := make([]classified, len(calls))
	considered := -1
	for i, c := range calls {
		cs[i] = rn.classify(c)
		if cs[i].kind == callClient {
			out.clientCalls = append(out.clientCalls, c)
		}
	}
	var accepted *classified
	var args orderedArgs
	for i := range cs {
		c := &cs[i]
		switch c.kind {
		case callUnknown:
			c.result, c.write = toolError(codeUnknownTool, fmt.Sprintf("agent %q has no tool or handoff named %q", rn.agent.Name, c.call.Function.Name)), true
		case callHandoff, callDisabled:
			if considered >= 0 {
				rn.refuseHandoff(ctx, c, codeExtraInTurn, "only one handoff per turn: "+strconv.Quote(cs[considered].call.Function.Name)+" came first")
				continue
			}
			considered = i
			if c.kind == callDisabled {
				rn.refuseHandoff(ctx, c, codeDenied, "this handoff is not enabled for this request")
				continue
			}
			a, err := parseArgs(c.handoff, c.call.Function.Arguments)
			if err != nil {
				rn.refuseHandoff(ctx, c, codeInvalidArgs, err.Error())
				continue
			}
			if rn.handoffs >= rn.graph.MaxHandoffs {
				rn.refuseHandoff(ctx, c, codeLimitExceeded, fmt.Sprintf("max_handoffs (%d) reached in this run; answer the user yourself", rn.graph.MaxHandoffs))
				continue
			}
			accepted, args = c, a
		}
	}
	rn.runServerTools(ctx, cs)
	for i := range cs {
		if cs[i].write {
			rn.transcript = append(rn.transcript, toolResult(cs[i].call.ID, cs[i].result))
		}
	}
	if out.clientCalls != nil {
		out.message = rn.transcript[lastAssistant(rn.transcript)]
		out.message.ToolCalls = out.clientCalls
		return out, nil
	}
	if accepted != nil {
		if err := rn.acceptHandoff(ctx, accepted.handoff, accepted.call, args); err != nil {
			return out, err
		}
		out.handoff = accepted.handoff
	}
	return out, nil
}

// resume finishes a turn that stopped for client tools, once the request has
// brought their results: the turn's handoff, if any, is taken up now.
func (rn *run) resume(ctx context.Context) (turnOutcome, error) {
	msgs := rn.transcript
	if lastAssistant(msgs) < 0 {
		// The turn that stopped is in the history: look from its last
		// assistant message on, copying only that much of it.
		if hi := lastAssistant(rn.history); hi >= 0 {
			msgs = append(slices.Clip(rn.history[hi:]), rn.transcript...)
		}
	}
	ai := lastAssistant(msgs)
	if ai < 0 || len(msgs[ai].ToolCalls) == 0 {
		return turnOutcome{}, nil
	}
	answered := make(map[string]bool)
	for _, m := range msgs[ai+1:] {
		if m.Role != RoleTool {
			return turnOutcome{}, nil // the user moved on; the open calls are dropped
		}
		answered[m.ToolCallID] = true
	}
	var rest []ToolCall
	for _, c := range msgs[ai].ToolCalls {
		if answered[c.ID] {
			continue
		}
		if rn.classify(c).kind == callClient {
			return turnOutcome{}, nil // still owed by the client
		}
		rest = append(rest, c)
	}
	if len(rest) == 0 {
		return turnOutcome{}, nil
	}
	return rn.turn(ctx, rest)
}

// classify tells what a call refers to for the current agent.
func (rn *run) classify(c ToolCall) classified {
	name := c.Function.Name
	if t := rn.agentTool(rn.agent, name); t != nil {
		return classified{call: c, kind: callServer, tool: t}
	}
	if h := agentHandoff(rn.agent, name); h != nil {
		if h.EnabledWhen.Holds(rn.req.Metadata, rn.req.Principal) {
			return classified{call: c, kind: callHandoff, handoff: h}
		}
		return classified{call: c, kind: callDisabled, handoff: h}
	}
	for _, t := range rn.req.ClientTools {
		if t.Name == name {
			return classified{call: c, kind: callClient}
		}
	}
	return classified{call: c, kind: callUnknown}
}

func (rn *run) agentTool(a *graphs.Agent, name string) *graphs.Tool {
	for _, t := range a.Tools {
		if t.Name == name {
			return t
		}
	}
	return nil
}

func agentHandoff(a *graphs.Agent, name string) *graphs.Handoff {
	for _, h := range a.Handoffs {
		if h.ToolName == name {
			return h
		}
	}
	return nil
}

// runServerTools runs the turn's server tools, concurrently when there are
// several, and records each result on its call.
func (rn *run) runServerTools(ctx context.Context, cs []classified) {
	n := 0
	for i := range cs {
		if cs[i].kind == callServer {
			n++
		}
	}
	if n == 0 {
		return
	}
	start := time.Now()
	defer func() { rn.external += time.Since(start) }()
	if n == 1 {
		for i := range cs {
			if cs[i].kind == callServer {
				cs[i].result, cs[i].write = rn.runTool(ctx, cs[i].tool, cs[i].call), true
			}
		}
		return
	}
	var wg sync.WaitGroup
	for i := range cs {
		if cs[i].kind != callServer {
			continue
		}
		wg.Add(1)
		go func(c *classified) {
			defer wg.Done()
			c.result = rn.runTool(ctx, c.tool, c.call)
		}(&cs[i])
		cs[i].write = true
	}
	wg.Wait()
}

// runTool runs one server tool under its span; a failure becomes the
// tool_failed result the model sees.
func (rn *run) runTool(ctx context.Context, t *graphs.Tool, c ToolCall) string {
	ctx, span := rn.startToolSpan(ctx, t.Name, c.ID)
	start := time.Now()
	var out string
	var err error
	if rn.opts.Tools == nil {
		err = fmt.Errorf("no tool runner configured")
	} else {
		out, err = rn.opts.Tools.Run(ctx, t, c.Function.Arguments)
	}
	rn.metrics.ToolCall(t.Name, time.Since(start).Seconds(), err != nil)
	endSpan(span, err)
	if err != nil {
		rn.log.Warn("tool failed", "tool", t.Name, "call", c.ID, "err", err)
		return toolError(codeToolFailed, fmt.Sprintf("tool %q failed: %v", t.Name, err))
	}
	return out
}

// lastAssistant is the index of the transcript's last assistant message, or -1.
func lastAssistant(t []Message) int {
	for i := len(t) - 1; i >= 0; i-- {
		if t[i].Role == RoleAssistant {
			return i
		}
	}
	return -1
}

// toolResult is a tool message answering the call id.
func toolResult(id, content string) Message {
	return Message{Role: RoleTool, ToolCallID: id, Content: content}
}

// toolError is the JSON text of a refused call (CONTRACT §4.3).
func toolError(code, message string) string {
	return `{"error": {"code": ` + strconv.Quote(code) + `, "message": ` + jsonString(message) + `}}`
}
