package runtime

import (
	"context"
	"strings"

	"github.com/switchboard-ai/switchboard/graphs"
)

// A run that pauses for approvals shows the client each pending call, its
// tool and the model's arguments (CONTRACT §6: "Approval required: <tool>
// <arguments JSON>"): text the gateway delivers, which output guardrails
// check before the client sees it (§7). An interceptor that checks it sets
// a PauseCheck on the request's run; the run then checks the pause's text
// before the pause is saved, and a check that fails ends the run as any
// trip does, with nothing of the step saved by a run that saves at its end.

// PauseCheck judges the text of a pause, agent's, before the client sees
// it: nil lets it through; an error (a *Halt for a trip) ends the run.
type PauseCheck func(ctx context.Context, run *RunInfo, agent *graphs.Agent, text string) error

// pauseCheckKey keys a run's PauseCheck in its RunInfo values.
type pauseCheckKey struct{}

// SetPauseCheck has the request's run's pauses checked by check.
func (ri *RunInfo) SetPauseCheck(check PauseCheck) { ri.SetValue(pauseCheckKey{}, check) }

// ApprovalText is a paused reply's content: one line per approval.
func ApprovalText(aps []Approval) string {
	lines := make([]string, len(aps))
	for i, a := range aps {
		lines[i] = "Approval required: " + a.Tool + " " + string(a.Arguments)
	}
	return strings.Join(lines, "\n")
}

// checkPause runs the request's run's PauseCheck, if any, on the text of
// the approvals s waits for.
func (rn *run) checkPause(ctx context.Context, s *Suspension) error {
	if rn.info.Parent != nil {
		return nil // a sub-agent's pause is its caller's, checked there
	}
	check, _ := rn.info.Value(pauseCheckKey{}).(PauseCheck)
	if check == nil {
		return nil
	}
	var aps []Approval
	for _, p := range s.Pending {
		if a, ok := p.Data.(Approval); ok && p.Reason == SuspendApproval {
			aps = append(aps, a)
		}
	}
	if len(aps) == 0 {
		return nil
	}
	return check(ctx, &rn.info, rn.agent, ApprovalText(aps))
}
