package runtime

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/switchboard-ai/switchboard/graphs"
)

// The permission gate (docs/permissions.md): every server tool and handoff
// call passes it before it runs. The graph's rules are read first, then the
// agent's; the first that matches decides, and no match allows. `ask`
// holds the call for a person: the gate answers with a ToolResult that
// suspends the run, and when the session's next request resumes the turn
// the call passes the gate again, which then answers with the decision.

// permissionGate is the Runner's own gate interceptor.
type permissionGate struct{ BaseInterceptor }

// InterceptTool decides each call before next runs it.
func (permissionGate) InterceptTool(next ToolFunc) ToolFunc {
	return func(ctx context.Context, inv *ToolInvocation) (ToolResult, error) {
		if inv.Refusal != nil || inv.rn == nil {
			return next(ctx, inv)
		}
		rn := inv.rn
		name := inv.Call.Function.Name
		rn.apprMu.Lock()
		a := rn.approvalFor(inv.Call.ID)
		var held Approval
		if a != nil {
			a.expire(time.Now())
			held = *a
			if held.Status != ApprovalPending {
				a.Used = true
				rn.approvalsDirty = true
			}
		}
		rn.apprMu.Unlock()
		if a != nil {
			switch held.Status {
			case ApprovalApproved:
				inv.Call.Function.Arguments = string(held.Arguments)
				return next(ctx, inv)
			case ApprovalRejected:
				msg := held.Reason
				if msg == "" {
					msg = rejectedDefault
				}
				return ToolError(codeRejected, msg), nil
			default:
				return ToolResult{Suspend: SuspendApproval, Data: held}, nil
			}
		}
		switch decideRules(inv.Run, inv.Agent, name) {
		case graphs.ActionDeny:
			return ToolError(codeDenied, strconv.Quote(name)+" is denied by a permission rule"), nil
		case graphs.ActionAsk:
			if rn.saver == nil {
				return ToolError(codeDenied, "approval requires a session"), nil
			}
			if rn.remembered(inv.Agent.Name, name) {
				return next(ctx, inv)
			}
			return rn.ask(inv), nil
		}
		return next(ctx, inv)
	}
}

// decideRules reads the graph's rules, then the agent's; no match allows.
func decideRules(ri *RunInfo, a *graphs.Agent, tool string) graphs.Action {
	for _, rules := range [][]graphs.Rule{ri.Graph.Permissions, a.Permissions} {
		for i := range rules {
			if rules[i].Matches(tool, ri.Metadata, ri.Principal) {
				return rules[i].Action
			}
		}
	}
	return graphs.ActionAllow
}

// ask records a pending approval for the call and holds it.
func (rn *run) ask(inv *ToolInvocation) ToolResult {
	ttl := rn.graph.ApprovalTTL
	if ttl <= 0 {
		ttl = graphs.DefaultApprovalTTL
	}
	args := json.RawMessage(inv.Call.Function.Arguments)
	var obj map[string]json.RawMessage
	if json.Unmarshal(args, &obj) != nil || obj == nil {
		args = json.RawMessage(`{}`)
	}
	a := Approval{
		ID: newApprovalID(), Tool: inv.Call.Function.Name, Arguments: args, Agent: inv.Agent.Name,
		ToolCallID: inv.Call.ID, Status: ApprovalPending, ExpiresAt: time.Now().Add(ttl).Unix(),
	}
	rn.apprMu.Lock()
	rn.approvals = append(rn.approvals, a)
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
