package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Sub-agents (CONTRACT §8): a tool of kind graphs.ToolAgent runs another
// agent over a transcript of its own (its instructions, then one user
// message, the task) until it answers; the answer is the tool's result.
// Only the call and that result enter the caller's transcript. The
// sub-agent's model calls count against the run's max_steps and token
// budget (the run's shared state); its spans are children of the caller's
// execute_tool span, because the tool chain hands the span's ctx down.

// SubagentRunner is the ToolRunner of graphs.ToolAgent tools. It needs no
// configuration: the Runner of the calling run runs the sub-agent.
type SubagentRunner struct{}

var _ ToolRunner = SubagentRunner{}

// Run runs the call's sub-agent and returns its answer. On a stream its
// work is reported through call.Emit as EventSubagent events.
func (SubagentRunner) Run(ctx context.Context, call *ToolInvocation) (string, error) {
	rn := call.rn
	at := call.Tool.Agent
	if rn == nil || at == nil || at.Agent == nil {
		return "", errors.New("not a sub-agent call of a run")
	}
	args := call.Call.Function.Arguments
	if strings.TrimSpace(args) == "" {
		args = "{}"
	}
	if err := validateArgs(at.Schema, args); err != nil {
		return "", &ToolCodeError{Code: codeInvalidArgs, Message: err.Error()}
	}
	caller, name, id := call.Agent.Name, at.Agent.Name, call.Call.ID
	messages := rn.pausedSubrun(id)
	if messages == nil {
		messages = []Message{{Role: RoleUser, Content: at.TaskMessage([]byte(args))}}
	}
	out := call.Emit
	h, check := holdFor(call)
	if h != nil {
		out = h.emit // held until the call's text passed (subagentcheck.go)
	}
	out(Event{Kind: EventSubagentStart, Agent: caller, Subagent: name, ToolCallID: id})
	emit := func(ev Event) {
		switch {
		case ev.Kind == EventDelta && ev.Agent == name && ev.Text != "":
			out(Event{Kind: EventSubagentDelta, Agent: caller, Subagent: name, ToolCallID: id, Text: ev.Text, Step: ev.Step})
		case ev.Kind == EventSubagentStart, ev.Kind == EventSubagentDelta, ev.Kind == EventSubagentDone:
			out(ev) // a sub-agent of the sub-agent: reported as its caller's
		}
	}
	params := rn.req.Params
	if params != nil && params.ResponseFormat != nil {
		// The client's response_format shapes the answer it reads, not
		// the text a sub-agent gives its caller.
		p := *params
		p.ResponseFormat = nil
		params = &p
	}
	res, err := rn.RunAgent(ctx, &AgentRequest{
		Parent:   call.Run,
		Graph:    rn.graph,
		Agent:    at.Agent,
		Messages: messages,
		Stream:   rn.req.Stream,
		Params:   params,
		within:   id,
	}, emit)
	if res != nil {
		rn.addUsage(res.Usage)
	}
	if re := (*RunError)(nil); errors.As(err, &re) {
		rn.addUsage(re.Usage) // its calls that answered before it failed
	}
	if err != nil {
		// What ends a sub-agent's run (max_steps, the budget, a provider
		// that failed, the client gone) ends the caller's.
		return "", &EndRunError{Err: fmt.Errorf("sub-agent %q: %w", name, err)}
	}
	if h != nil {
		if err := h.release(ctx, call, check, call.Emit); err != nil {
			return "", &EndRunError{Err: err} // a trip ends the run
		}
	}
	if s := res.Suspension; s != nil {
		if !onlyApprovals(s) {
			return "", fmt.Errorf("sub-agent %q stopped for calls nobody can answer", name)
		}
		// Paused for approvals: the caller's call waits with them, and
		// the sub-agent goes on from here when they are decided.
		rn.nestPause(id, name, res.transcript)
		return "", &subagentHold{pending: s.Pending}
	}
	call.Emit(Event{Kind: EventSubagentDone, Agent: caller, Subagent: name, ToolCallID: id})
	return res.Message.Content, nil
}

// validateArgs checks a call's JSON arguments against schema.
func validateArgs(schema *jsonschema.Schema, raw string) error {
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(raw))
	if err != nil {
		return fmt.Errorf("arguments are not valid JSON: %v", err)
	}
	if schema == nil {
		return nil
	}
	if err := schema.Validate(v); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			return fmt.Errorf("arguments do not match the input schema: %s", strings.Join(leafErrors(ve), "; "))
		}
		return fmt.Errorf("arguments do not match the input schema: %v", err)
	}
	return nil
}

// addUsage adds a model call's usage, or a sub-agent run's, to the run's;
// tools of a turn run concurrently.
func (rn *run) addUsage(u Usage) {
	rn.usageMu.Lock()
	rn.usage.Add(u)
	rn.usageMu.Unlock()
}
