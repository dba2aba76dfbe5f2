package runtime

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Approvals deep in a sub-agent (CONTRACT §6, §8): a sub-agent's calls pass
// the gate under its own rules, and one behind `ask` pauses the session's
// run like any call of the lead. The sub-agent's run shares the session
// run's approvals (approvalBook); when it pauses, its transcript so far is
// kept on the approvals it waits for (Approval.Nest), and its caller's
// ask_<name> call is held, the pause listing the sub-agent's approvals.
// When the session's next request resumes the turn, the held call runs
// again: the sub-agent goes on from its kept transcript, its decided calls
// run or are rejected, and it answers its caller as if it had not stopped.

// approvalBook holds a session's approvals while a run changes them.
type approvalBook struct {
	// approvals are the session's (approvals.go), changed under apprMu
	// while tools run; approvalsDirty has the next save write them.
	approvals      []Approval
	approvalsDirty bool
	apprMu         sync.Mutex
	// asked are the approvals this run created, for on_approval_required.
	asked []Approval
}

// NestFrame is one sub-agent call an approval was asked for under.
type NestFrame struct {
	// CallID is the id of the ask_<name> call in the run that asked the
	// sub-agent.
	CallID string `json:"callId"`
	// Agent is the sub-agent.
	Agent string `json:"agent,omitempty"`
	// Transcript is the sub-agent's transcript when it paused (its task,
	// its turns, the results it had): where it goes on from.
	Transcript []Message `json:"transcript,omitempty"`
}

// public is the approval as clients see it: without the sub-agent
// transcripts kept for its resumption.
func (a Approval) public() Approval {
	a.Nest = nil
	return a
}

// under reports whether a was asked for by a run under the sub-agent
// calls nest (none: the session's own run).
func (a *Approval) under(nest []string) bool {
	return len(a.Nest) == len(nest) && framesAre(a.Nest, nest)
}

// below reports whether a was asked for inside the sub-agent that the
// call callID of the run under nest asked.
func (a *Approval) below(nest []string, callID string) bool {
	d := len(nest)
	return len(a.Nest) > d && a.Nest[d].CallID == callID && framesAre(a.Nest[:d], nest)
}

// framesAre reports whether the frames are those of the calls ids.
func framesAre(fs []NestFrame, ids []string) bool {
	for i, id := range ids {
		if fs[i].CallID != id {
			return false
		}
	}
	return true
}

// root is the session's run this run belongs to: itself, or the run that
// asked the sub-agent, and so on up.
func (rn *run) root() *run {
	for rn.info.Parent != nil && rn.info.Parent.rn != nil {
		rn = rn.info.Parent.rn
	}
	return rn
}

// canPause reports whether a call of this run may wait for a person: its
// session's run has a session that outlives it.
func (rn *run) canPause() bool {
	r := rn.root()
	return r.saver != nil && !r.req.Ephemeral
}

// nestFrames are the frames of an approval this run asks for; each gets
// its transcript when its sub-agent pauses (nestPause).
func (rn *run) nestFrames() []NestFrame {
	if len(rn.nest) == 0 {
		return nil
	}
	fs := make([]NestFrame, len(rn.nest))
	for i, id := range rn.nest {
		fs[i].CallID = id
	}
	return fs
}

// pausedSubrun returns the transcript the sub-agent of this run's call
// callID paused with, when an approval of the session waits inside it;
// nil otherwise. The caller does not hold apprMu. Not inlined: the gate
// and the turn are on a stream's stack (issue 22).
//
//go:noinline
func (rn *run) pausedSubrun(callID string) []Message {
	rn.apprMu.Lock()
	defer rn.apprMu.Unlock()
	if f := rn.pausedFrame(callID); f != nil {
		return slices.Clone(f.Transcript)
	}
	return nil
}

// pausedAt reports whether the sub-agent of this run's call callID paused
// inside (pausedSubrun, without copying its transcript). Not inlined, as
// pausedSubrun.
//
//go:noinline
func (rn *run) pausedAt(callID string) bool {
	rn.apprMu.Lock()
	defer rn.apprMu.Unlock()
	return rn.pausedFrame(callID) != nil
}

// pausedFrame is the frame of an open approval asked inside the sub-agent
// of this run's call callID, once that sub-agent paused; the caller holds
// apprMu.
func (rn *run) pausedFrame(callID string) *NestFrame {
	for i := range rn.approvals {
		a := &rn.approvals[i]
		if !a.Used && a.below(rn.nest, callID) && a.Nest[len(rn.nest)].Transcript != nil {
			return &a.Nest[len(rn.nest)]
		}
	}
	return nil
}

// nestPause keeps, on every open approval asked inside the sub-agent of
// this run's call callID, the transcript that sub-agent paused with.
func (rn *run) nestPause(callID, agent string, transcript []Message) {
	rn.apprMu.Lock()
	defer rn.apprMu.Unlock()
	d := len(rn.nest)
	for i := range rn.approvals {
		a := &rn.approvals[i]
		if a.Used || !a.below(rn.nest, callID) {
			continue
		}
		// The frames may be shared with the session as loaded: copied
		// before they change.
		a.Nest = slices.Clone(a.Nest)
		a.Nest[d] = NestFrame{CallID: callID, Agent: agent, Transcript: slices.Clone(transcript)}
		rn.approvalsDirty = true
	}
}

// subagentHold is what a sub-agent's runner returns when the sub-agent
// paused for approvals: its caller's call is held, and the pause lists the
// sub-agent's pending calls.
type subagentHold struct{ pending []PendingCall }

func (h *subagentHold) Error() string { return "the sub-agent waits for approvals" }

// pendingOf returns the pending calls a held call stands for: itself, or
// the sub-agent's calls it waits for. Not inlined into the turn, whose
// frame is on a stream's stack (issue 22).
//
//go:noinline
func pendingOf(call ToolCall, agent string, r ToolResult) []PendingCall {
	if h, ok := r.Data.(*subagentHold); ok {
		return h.pending
	}
	return []PendingCall{{Call: call, Agent: agent, Reason: r.Suspend, Data: r.Data}}
}

// onlyApprovals reports whether a suspension waits for approvals alone.
func onlyApprovals(s *Suspension) bool {
	for _, p := range s.Pending {
		if p.Reason != SuspendApproval {
			return false
		}
	}
	return len(s.Pending) > 0
}

// nestedPending returns the pending approvals asked for inside the
// sub-agent of this run's call callID, as the calls they hold.
func (rn *run) nestedPending(callID string) []PendingCall {
	rn.apprMu.Lock()
	defer rn.apprMu.Unlock()
	var out []PendingCall
	now := time.Now()
	for _, a := range rn.approvals {
		if a.Used || !a.below(rn.nest, callID) {
			continue
		}
		if a.expire(now); a.Status == ApprovalPending {
			call := ToolCall{ID: a.ToolCallID, Type: "function", Function: FunctionCall{Name: a.Tool, Arguments: string(a.Arguments)}}
			out = append(out, PendingCall{Call: call, Agent: a.Agent, Reason: SuspendApproval, Data: a.public()})
		}
	}
	return out
}

// gatedCall reports whether the call callID of this run has an approval
// of its own, or one inside the sub-agent it asked. A sub-agent's run
// reads the approvals while its siblings' runs change them.
func (rn *run) gatedCall(callID string) bool {
	rn.apprMu.Lock()
	a := rn.approvalFor(callID)
	rn.apprMu.Unlock()
	return a != nil || rn.pausedAt(callID)
}

// dropNested ends the approvals asked for inside the sub-agent of the
// paused call callID when the user sends a new message instead (moveOn):
// the sub-agent does not go on, so each approval is counted as it stands
// (once a save keeps it, as moveOn's own), one still pending rejected with
// the new-message reason. moveOn marks them used.
func (rn *run) dropNested(ctx context.Context, callID string) {
	now := time.Now()
	for i := range rn.approvals {
		a := &rn.approvals[i]
		if a.Used || !a.below(rn.nest, callID) {
			continue
		}
		a.expire(now)
		decision := DecisionRejected
		switch {
		case a.Status == ApprovalPending:
			a.Status, a.Reason, a.DecidedAt = ApprovalRejected, rejectedNewMessage, now.Unix()
		case a.Status == ApprovalApproved:
			decision = DecisionApproved
		case a.expired():
			decision = DecisionExpired
		}
		// Used at once: without its frames it would read as one of this
		// run's own approvals, and a later call of the same id would
		// find it (approvalFor).
		a.Used, a.Nest = true, nil
		rn.session.deferDecision(ctx, a.Tool, decision)
	}
}
