package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/switchboard-ai/switchboard/graphs"
)

// The session layer: what a run in a session adds to the agent loop. The
// session is loaded and locked (Acquire), its lease renewed while the run
// lasts (lease.go), every step saved under the lease, and the lock released
// at the end, with the last save when it can. runtime owns sessions: the
// gateway reads and deletes them through the Runner, so that what the
// Runner remembers of a session (its prompt reading) is always forgotten
// with it.

// runSession runs a request in its session.
//
// It is on the stack, below the run loop, for as long as a stream lasts:
// what needs a large frame (loading and locking the session, setting the
// run up) is in openSession, which has returned by then (issue 22).
func (r *Runner) runSession(ctx context.Context, req *Request, sink Sink) (*Result, error) {
	rn, ctx, end, err := r.openSession(ctx, req, sink)
	if err != nil {
		return nil, err
	}
	defer end()
	res, err := rn.start(ctx)
	// Once the last save released the lock a renewal finds it gone and
	// cancels ctx; the run had already ended with its work stored.
	if !rn.session.released && errors.Is(context.Cause(ctx), ErrLeaseLost) {
		return nil, rn.failed(leaseLost())
	}
	if err != nil {
		// Even when the client has gone: its finished steps are kept.
		if kerr := rn.session.keepFinished(context.WithoutCancel(ctx), rn); kerr != nil {
			r.log.Warn("save the finished steps of a failed run", "session", req.SessionID, "err", kerr)
		}
	}
	if err == nil {
		return res, nil
	}
	return res, rn.failedAt(err)
}

// failedAt is failed for a session's run: the error also says where the
// session stands after the steps the run saved (RunError.Point).
//
//go:noinline
func (rn *run) failedAt(err error) error {
	re := rn.failed(err).(*RunError)
	sv := &rn.session
	p := pointAfter(rn.history, rn.transcript[:min(sv.saved, len(rn.transcript))], sv.version, sv.holder)
	re.Point = &p
	return re
}

// leaseLost is the error of a run whose session lock was lost.
func leaseLost() error { return fmt.Errorf("run stopped: %w", ErrLeaseLost) }

// openSession loads and locks req's session and sets up its run: the run,
// the context it runs in (cancelled should the lease be lost) and end,
// which stops the lease's renewal and releases the lock unless the last
// save did. On an error nothing is left held.
func (r *Runner) openSession(ctx context.Context, req *Request, sink Sink) (*run, context.Context, func(), error) {
	input := newInput(req.Messages)
	key := SessionKey{Principal: req.Principal, ID: req.SessionID}
	sess, lease, err := r.acquire(ctx, key)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("acquire session: %w", err)
	}
	if at := req.At; at != nil && at.Version != sess.Version && !at.holds(sess) {
		_ = r.opts.Store.Release(context.WithoutCancel(ctx), key, lease)
		return nil, nil, nil, fmt.Errorf("continue session at version %d, now %d: %w", at.Version, sess.Version, ErrMoved)
	}
	rn := r.newRun(req, sink, nil)
	sv := &rn.session
	*sv = sessionSaver{store: r.opts.Store, key: key, lease: lease, version: sess.Version, holder: sess.ActiveAgent}
	runCtx, cancel := context.WithCancelCause(ctx)
	stop := r.keepLease(runCtx, key, lease, cancel)
	end := func() {
		stop()
		cancel(nil)
		if sv.released {
			return // the last save released the lock in its own round trip
		}
		// The lock goes back even when the client has gone away.
		if err := r.opts.Store.Release(context.WithoutCancel(ctx), key, lease); err != nil {
			r.log.Warn("release session", "session", key.ID, "err", err)
		}
	}

	rn.saver = sv
	rn.approvals = cloneApprovals(sess.Approvals)
	if err := rn.applyDecisions(req.Approvals); err != nil {
		end()
		return nil, nil, nil, err
	}
	var decided []Approval
	if len(req.Approvals) > 0 {
		decided = cloneApprovals(rn.approvals)
	}
	rn.history = sess.Messages
	rn.histScan = r.prompts.history(key, rn.history)
	rn.transcript = append(make([]Message, 0, len(input)+8), input...)
	rn.agent = activeAgent(req.Graph, rn.histScan.marker)
	rn.info.Agent, rn.info.Input = rn.agent, input
	// Before the approvals are moved on: a refused request changes nothing.
	if err := checkResults(rn.history, req.Messages, len(req.Messages)-len(input)); err != nil {
		end()
		return nil, nil, nil, err
	}
	if hi := lastAssistant(rn.history); hi >= 0 && slices.ContainsFunc(input, isToolResult) {
		if err := rn.checkOwed(append(slices.Clip(rn.history[hi:]), input...), len(input)); err != nil {
			end()
			return nil, nil, nil, err
		}
	}
	switch paused := rn.openApprovals(); {
	case paused && movesOn(input):
		rn.moveOn(runCtx)
	case !paused && len(input) == 0 && !unfinished(rn.history):
		end()
		return nil, nil, nil, fmt.Errorf("%w: a session request needs new input after its last assistant message", ErrInvalidRequest)
	}
	if err := rn.checkClientTools(); err != nil {
		end()
		return nil, nil, nil, err
	}
	if decided != nil {
		// The request is not refused: its decisions are recorded now, as
		// POST .../approvals/{id} records them, so that they stand
		// whatever becomes of the run (a guardrail that trips leaves the
		// session as it was, a run that fails may save nothing). Deciding
		// one again is 409 (CONTRACT §6), a retry of the request too; the
		// session's next request, without them, goes on (unfinished).
		w := Write{ActiveAgent: sess.ActiveAgent, Approvals: decided, SetApprovals: true}
		v, err := r.opts.Store.Save(ctx, key, lease, w)
		if err != nil {
			end()
			return nil, nil, nil, fmt.Errorf("save decisions: %w", err)
		}
		sv.version = v
	}
	return rn, runCtx, end, nil
}

// sessionSaver saves a session run's steps under its lease.
type sessionSaver struct {
	store    Store
	key      SessionKey
	lease    Lease
	version  int64
	saved    int    // the run's transcript[:saved] is stored, after its history
	replace  bool   // the next save rewrites the whole session
	released bool   // the last save gave the lock back
	atEnd    bool   // only the last save writes (SaveAtEnd)
	holder   string // the session's active agent as last stored
	// With atEnd, the steps the run has finished, unwritten:
	// transcript[:finished], with finishedBy holding the session and the
	// approvals as they stood then. A run that fails writes them
	// (keepFinished), as any run keeps its finished steps; only an answer
	// or a halt ends it otherwise.
	finished      int
	finishedBy    string
	finishedAppr  []Approval
	finishedDirty bool
	// moved are the decisions a new user message made on the session's
	// pending approvals (moveOn), counted by the first save, which keeps
	// them, on movedCtx's span: the request's, where moveOn ran.
	moved    []movedDecision
	movedCtx context.Context
}

// movedDecision is a decision moveOn made, waiting to be counted.
type movedDecision struct{ tool, decision string }

// deferDecision keeps a decision of moveOn's for the save that stores it:
// a run that keeps nothing (an input guardrail that trips) leaves the
// approval pending, and counts nothing.
func (sv *sessionSaver) deferDecision(ctx context.Context, tool, decision string) {
	sv.moved = append(sv.moved, movedDecision{tool: tool, decision: decision})
	sv.movedCtx = ctx
}

// replaced records that an input filter rewrote the run's transcript: the
// next save replaces the whole session with it.
func (sv *sessionSaver) replaced() { sv.saved, sv.replace = 0, true }

// save writes what the run added since the last save, as one step, with
// holder as the session's active agent. The run's last save (last set) has
// the store release the lock with the write, which saves a round trip;
// when there is nothing to write, or the write fails, the lock stays for
// runSession to release.
func (sv *sessionSaver) save(ctx context.Context, rn *run, holder string, last bool) error {
	if sv.atEnd && !last {
		sv.finished, sv.finishedBy = len(rn.transcript), holder
		rn.apprMu.Lock()
		sv.finishedAppr, sv.finishedDirty = cloneApprovals(rn.approvals), rn.approvalsDirty
		rn.apprMu.Unlock()
		return nil
	}
	w := Write{ActiveAgent: holder, Replace: sv.replace, Messages: rn.transcript, Release: last}
	if !sv.replace {
		w.Messages = rn.transcript[sv.saved:]
	}
	rn.apprMu.Lock()
	if ttl := rn.graph.ApprovalTTL; ttl > 0 {
		var dropped bool
		if rn.approvals, dropped = pruneApprovals(rn.approvals, ttl, time.Now()); dropped {
			rn.approvalsDirty = true
		}
	}
	if rn.approvalsDirty {
		w.SetApprovals, w.Approvals = true, cloneApprovals(rn.approvals)
	}
	rn.apprMu.Unlock()
	if len(w.Messages) == 0 && !w.Replace && !w.SetApprovals {
		return nil
	}
	v, err := sv.store.Save(ctx, sv.key, sv.lease, w)
	if err != nil {
		return fmt.Errorf("save session: %w", err)
	}
	sv.version, sv.saved, sv.replace, sv.released, sv.holder = v, len(rn.transcript), false, last, holder
	for _, d := range sv.moved {
		rn.recordDecision(sv.movedCtx, d.tool, d.decision, SourceApprover)
	}
	sv.moved, sv.movedCtx = nil, nil
	if w.SetApprovals {
		rn.apprMu.Lock()
		rn.approvalsDirty = false
		rn.apprMu.Unlock()
	}
	return nil
}

// keepFinished writes the steps a run saving at its end had finished when
// it failed (a provider error, max_steps, a budget, the client gone): what
// a run that saves step by step would have stored. A halted run (a
// guardrail that tripped) ends with a result, not an error, and keeps
// nothing.
func (sv *sessionSaver) keepFinished(ctx context.Context, rn *run) error {
	if !sv.atEnd || sv.finished == 0 || sv.released {
		return nil
	}
	// The approvals too as they stood after the last finished step: one
	// the failed step asked for has no call stored to answer.
	all := rn.transcript
	rn.apprMu.Lock()
	rn.transcript, rn.approvals, rn.approvalsDirty = all[:sv.finished], sv.finishedAppr, sv.finishedDirty
	rn.apprMu.Unlock()
	sv.atEnd = false
	err := sv.save(ctx, rn, sv.finishedBy, false)
	rn.transcript = all
	return err
}

// movesOn reports whether input brings a new user message: what rejects
// a paused turn's pending approvals (CONTRACT §6). Tool results answer the
// turn, and a system or developer message is context for the run, which a
// client may send beside its decisions.
func movesOn(input []Message) bool {
	for _, m := range input {
		if m.Role != RoleTool && !m.IsSystem() {
			return true
		}
	}
	return false
}

// busyGrace is how long a request waits for a session's lock before it is
// answered 409: long enough to cover a run that is just finishing (a client
// that aborts a stream and sends its next turn at once races the aborted
// run's release), short next to any real run.
const busyGrace = 250 * time.Millisecond

// acquire takes the session's lock, trying again for up to busyGrace while
// another run holds it.
func (r *Runner) acquire(ctx context.Context, key SessionKey) (*Session, Lease, error) {
	deadline := time.Now().Add(busyGrace)
	for {
		sess, lease, err := r.opts.Store.Acquire(ctx, key)
		if !errors.Is(err, ErrBusy) || time.Now().After(deadline) {
			return sess, lease, err
		}
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, Lease{}, ctx.Err()
		case <-t.C:
		}
	}
}

// Session reads a session without locking it; ErrNotFound when absent,
// ErrInvalidRequest when sessions are not configured.
func (r *Runner) Session(ctx context.Context, key SessionKey) (*Session, error) {
	if r.opts.Store == nil {
		return nil, fmt.Errorf("%w: sessions are not configured", ErrInvalidRequest)
	}
	return r.opts.Store.Load(ctx, key)
}

// ListSessions returns up to limit of principal's sessions, the most
// recently written first; ErrInvalidRequest when sessions are not
// configured.
func (r *Runner) ListSessions(ctx context.Context, principal string, limit int) ([]SessionInfo, error) {
	if r.opts.Store == nil {
		return nil, fmt.Errorf("%w: sessions are not configured", ErrInvalidRequest)
	}
	return r.opts.Store.List(ctx, principal, limit)
}

// DeleteSession forgets a session, and what the Runner remembers of it;
// deleting an absent session is not an error.
func (r *Runner) DeleteSession(ctx context.Context, key SessionKey) error {
	if r.opts.Store == nil {
		return fmt.Errorf("%w: sessions are not configured", ErrInvalidRequest)
	}
	if err := r.opts.Store.Delete(ctx, key); err != nil {
		return err
	}
	r.prompts.forget(key)
	return nil
}

// ForgetSession drops what the Runner remembers of a session (how its
// history reads; see promptCache) without deleting it.
func (r *Runner) ForgetSession(key SessionKey) {
	r.prompts.forget(key)
}

// Ready reports whether the Runner can serve sessions: nil when the store
// answers (or there is none). The error wraps ErrStoreUnavailable and may
// name the store's address: log it, do not show it.
func (r *Runner) Ready(ctx context.Context) error {
	if r.opts.Store == nil {
		return nil
	}
	return r.opts.Store.Ping(ctx)
}

// newInput returns the messages after the last assistant message, all of
// them when there is none: clients may resend the whole history or send only
// the new turn.
func newInput(msgs []Message) []Message {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == RoleAssistant {
			return msgs[i+1:]
		}
	}
	return msgs
}

// checkResults refuses a tool result among msgs[from:] that answers no call
// of the assistant message it follows (only system and developer messages,
// folded into the system prompt, and the turn's other results may come
// between): of msgs itself, or history's last one for the results that open
// msgs[from:]. OpenAI refuses such a result; kept, the prompt would drop it
// unseen, and a session would store it without its call while the run went
// on with no new input. A session request checks its new input against the
// session (from: where the input starts), a stateless one all its messages
// (history nil, from 0). There, results that open the messages, before
// any user or assistant message, are let through (the prompt drops them):
// a client that sends a window of its history (the Agents SDK's session
// limit) may cut it between a call and its result.
func checkResults(history, msgs []Message, from int) error {
	var calls []ToolCall
	if ai := lastAssistant(history); ai >= 0 {
		calls = history[ai].ToolCalls
	}
	window, loose := history == nil && from == 0, -1
	for i := from; i < len(msgs); i++ {
		m := &msgs[i]
		switch {
		case m.IsSystem():
		case m.Role == RoleTool && window:
			if loose < 0 {
				loose = i
			}
		case m.Role != RoleTool:
			window = false
			// A user message moves on from the calls; an assistant
			// message opens a turn of its own.
			calls = m.ToolCalls
		case !slices.ContainsFunc(calls, func(c ToolCall) bool { return c.ID == m.ToolCallID }):
			return paramError(fmt.Sprintf("messages[%d].tool_call_id", i),
				"messages[%d] is a tool result for %q, which answers no tool call of the assistant message before it", i, m.ToolCallID)
		}
	}
	if window && loose >= 0 {
		// Results and nothing else: no window of a conversation.
		return paramError(fmt.Sprintf("messages[%d].tool_call_id", loose),
			"messages[%d] is a tool result for %q, which answers no tool call of the assistant message before it", loose, msgs[loose].ToolCallID)
	}
	return nil
}

// activeAgent is the agent a session's last handoff marker names (its
// `to`, docs/handoffs.md), or the lead when there is none or that agent is
// not in the graph.
func activeAgent(g *graphs.Graph, marker string) *graphs.Agent {
	if a, ok := g.Agents[marker]; ok {
		return a
	}
	return g.Lead
}

// unfinished reports whether a session's last saved step left its turn
// for the model to go on from: its last message is a tool result (the run
// failed after the step, CONTRACT §4.1: the next request resumes from it).
// Such a session's next request may bring no new message.
func unfinished(history []Message) bool {
	return len(history) > 0 && history[len(history)-1].Role == RoleTool
}
