package runtime

import (
	"bytes"
	"context"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-ai/switchboard/graphs"
)

// The permission gate (docs/permissions.md): every server tool and handoff
// call passes it before it runs. The graph's rules are read first, then the
// agent's; the first that matches decides, and no match allows. `ask`
// holds the call for a person: the gate answers with a ToolResult that
// suspends the run, and when the session's next request resumes the turn
// the call passes the gate again, which then answers with the decision.

// permissionGate is the Runner's own gate interceptor. It records each
// decision on the call (ToolInvocation.perm); the observer, outside it,
// counts it and puts it on the call's span.
type permissionGate struct {
	BaseInterceptor
	tracer trace.Tracer
}

// The decisions and their sources (docs/permissions.md).
const (
	DecisionAllowed  = "allowed"
	DecisionDenied   = "denied"
	DecisionPending  = "pending"
	DecisionApproved = "approved"
	DecisionRejected = "rejected"
	DecisionExpired  = "expired"

	SourceRule       = "rule"
	SourceHook       = "hook"
	SourceDefault    = "default"
	SourceRemembered = "remembered"
	SourceApprover   = "approver"
)

// permDecision is what the gate decided about one call.
type permDecision struct{ decision, source string }

// InterceptTool decides each call before next runs it.
func (g permissionGate) InterceptTool(next ToolFunc) ToolFunc {
	return func(ctx context.Context, inv *ToolInvocation) (ToolResult, error) {
		if inv.Refusal != nil || inv.rn == nil {
			return next(ctx, inv)
		}
		rn := inv.rn
		rn.apprMu.Lock()
		a := rn.approvalFor(inv.Call.ID)
		var held Approval
		if a != nil {
			a.expire(time.Now())
			held = *a
			held.Nest = nil // as clients see it
			if held.Status != ApprovalPending {
				a.Used, a.Nest = true, nil
				rn.approvalsDirty = true
			}
		}
		rn.apprMu.Unlock()
		if a != nil {
			// The approval carries the decision, and the arguments the
			// hook may have rewritten: the hook is not asked again.
			switch held.Status {
			case ApprovalApproved:
				inv.perm = &permDecision{DecisionApproved, SourceApprover}
				if !bytes.Equal(held.Arguments, objectArgs(inv.Call.Function.Arguments)) {
					// Only a rewrite replaces what the model wrote: arguments
					// that are no JSON object, shown to the approver as {},
					// run as the same call would without a gate.
					inv.Call.Function.Arguments = string(held.Arguments)
				}
				return next(ctx, inv)
			case ApprovalRejected:
				msg := held.Reason
				inv.perm = &permDecision{DecisionRejected, SourceApprover}
				if held.expired() {
					inv.perm.decision = DecisionExpired
				}
				if msg == "" {
					msg = rejectedDefault
				}
				return ToolError(codeRejected, msg), nil
			default:
				// Still pending: counted when it paused.
				return ToolResult{Suspend: SuspendApproval, Data: held}, nil
			}
		}
		if inv.Tool != nil && inv.Tool.Agent != nil && rn.pausedAt(inv.Call.ID) {
			// A sub-agent call that the gate let through, paused inside:
			// it goes on, and is not decided again.
			return next(ctx, inv)
		}
		return g.decide(ctx, inv, next)
	}
}

// decide asks the hook, if the graph has one, then reads the rules; the
// stricter action wins.
func (g permissionGate) decide(ctx context.Context, inv *ToolInvocation, next ToolFunc) (ToolResult, error) {
	rn := inv.rn
	hooked := false
	var verdict HookVerdict
	if h := inv.Run.Graph.PreToolCall; h != nil {
		v, err := g.askHook(ctx, inv, h)
		if err != nil {
			if ctx.Err() != nil {
				return ToolResult{}, ctx.Err() // the run is over, not the hook's fault
			}
			inv.perm = &permDecision{DecisionDenied, SourceHook}
			return ToolError(codeDenied, "the pre_tool_call hook failed: "+err.Error()), nil
		}
		if v.Arguments != nil {
			rn.rewriteArgs(inv, v.Arguments)
		}
		verdict, hooked = v, true
	}
	name := inv.Call.Function.Name
	action, matched := decideRules(inv.Run, inv.Agent, name)
	source := SourceDefault
	if matched {
		source = SourceRule
	}
	// The hook is asked first; a rule changes its decision only when it is
	// stricter.
	if hooked && verdict.Action.Strictness() >= action.Strictness() {
		action, source = verdict.Action, SourceHook
	}
	switch action {
	case graphs.ActionDeny:
		inv.perm = &permDecision{DecisionDenied, source}
		msg := strconv.Quote(name) + " is denied by a permission rule"
		if source == SourceHook {
			msg = verdict.Reason
			if msg == "" {
				msg = strconv.Quote(name) + " is denied by the pre_tool_call hook"
			}
		}
		return ToolError(codeDenied, msg), nil
	case graphs.ActionAsk:
		if !rn.canPause() {
			inv.perm = &permDecision{DecisionDenied, source}
			return ToolError(codeDenied, "approval requires a session"), nil
		}
		if rn.remembered(inv.Agent.Name, name) {
			inv.perm = &permDecision{DecisionAllowed, SourceRemembered}
			return next(ctx, inv)
		}
		if rn.root().held != nil {
			// The user sent a new message while the turn was paused, and
			// an approved call of it (a sub-agent) now asks about another:
			// nobody is asked any more, as for the turn's pending calls.
			inv.perm = &permDecision{DecisionRejected, source}
			return ToolError(codeRejected, rejectedNewMessage), nil
		}
		inv.perm = &permDecision{DecisionPending, source}
		return rn.ask(inv), nil
	}
	inv.perm = &permDecision{DecisionAllowed, source}
	return next(ctx, inv)
}

// decideRules reads the graph's rules, then the agent's; no match allows.
func decideRules(ri *RunInfo, a *graphs.Agent, tool string) (graphs.Action, bool) {
	for _, rules := range [][]graphs.Rule{ri.Graph.Permissions, a.Permissions} {
		for i := range rules {
			if rules[i].Matches(tool, ri.Metadata, ri.Principal) {
				return rules[i].Action, true
			}
		}
	}
	return graphs.ActionAllow, false
}

// ask records a pending approval for the call and holds it.
func (rn *run) ask(inv *ToolInvocation) ToolResult {
	ttl := rn.graph.ApprovalTTL
	if ttl <= 0 {
		ttl = graphs.DefaultApprovalTTL
	}
	args := objectArgs(inv.Call.Function.Arguments)
	a := Approval{
		ID: newApprovalID(), Tool: inv.Call.Function.Name, Arguments: args, Agent: inv.Agent.Name,
		ToolCallID: inv.Call.ID, Status: ApprovalPending, ExpiresAt: time.Now().Add(ttl).Unix(),
		Nest: rn.nestFrames(),
	}
	rn.apprMu.Lock()
	rn.approvals = append(rn.approvals, a)
	a = a.public()
	rn.asked = append(rn.asked, a)
	rn.approvalsDirty = true
	rn.apprMu.Unlock()
	return ToolResult{Suspend: SuspendApproval, Data: a}
}

// remembered reports whether an approval with remember approved calls of
// tool by agent since the session's last handoff.
func (rn *run) remembered(agent, tool string) bool {
	rn.apprMu.Lock()
	defer rn.apprMu.Unlock()
	for _, a := range rn.approvals {
		if a.Remember && a.Status == ApprovalApproved && a.Agent == agent && a.Tool == tool {
			return true
		}
	}
	return false
}

// forgetRemembered drops every remembered approval: a handoff moved the
// session to another agent.
func (rn *run) forgetRemembered() {
	rn.apprMu.Lock()
	defer rn.apprMu.Unlock()
	for i := range rn.approvals {
		if rn.approvals[i].Remember {
			rn.approvals[i].Remember = false
			rn.approvalsDirty = true
		}
	}
}
