package runtime

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/switchboard-ai/switchboard/internal/redact"
)

// Approvals are the decisions a permission rule's `ask` waits for
// (docs/permissions.md). They are stored with the session: the run that
// pauses writes them with its last step, a decision is written under the
// session's lock, and the session's next request resumes the turn once
// every approval of it is decided.

// Approval statuses.
const (
	ApprovalPending  = "pending"
	ApprovalApproved = "approved"
	ApprovalRejected = "rejected"
)

// SuspendApproval is the suspension reason of a call held for approval.
const SuspendApproval = "approval_required"

// Approval is one call waiting for, or decided by, a person.
type Approval struct {
	ID         string          `json:"id"`
	Tool       string          `json:"tool"`
	Arguments  json.RawMessage `json:"arguments"`
	Agent      string          `json:"agent"`
	ToolCallID string          `json:"toolCallId"`
	Status     string          `json:"status"`
	ExpiresAt  int64           `json:"expiresAt"`
	Reason     string          `json:"reason,omitempty"`
	// Remember approves later calls of the tool by the agent in this
	// session without asking, until the next handoff clears it.
	Remember bool `json:"remember,omitempty"`
	// Used is set once the decision answered its call: a later call that
	// reuses the tool call id is a new call.
	Used bool `json:"used,omitempty"`
	// DecidedAt is when it was decided, approved, rejected or expired
	// (unix seconds); a used one is dropped approval_ttl after it.
	DecidedAt int64 `json:"decidedAt,omitempty"`
	// Nest places an approval asked for inside a sub-agent: the sub-agent
	// calls it is under, outermost first, each with the transcript its
	// sub-agent paused with (nested.go). Clients never see it (public).
	Nest []NestFrame `json:"nest,omitempty"`
}

// Decision is a person's answer to one approval.
type Decision struct {
	ID       string
	Approve  bool
	Reason   string
	Remember bool
}

// Errors of deciding an approval.
var (
	// ErrApprovalNotFound: no such approval in the caller's session.
	ErrApprovalNotFound = errors.New("approval not found")
	// ErrApprovalDecided: the approval was decided before.
	ErrApprovalDecided = errors.New("approval already decided")
)

// Rejection messages of the contract.
const (
	rejectedDefault    = "rejected by the approver"
	rejectedNewMessage = "the user sent a new message instead"
	rejectedExpired    = "expired"
	codeRejected       = "rejected"
)

// newApprovalID returns "apr_" and 128 random bits in lowercase hex.
func newApprovalID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "apr_" + hex.EncodeToString(b[:])
}

// expire rejects a pending approval whose time is past.
func (a *Approval) expire(now time.Time) {
	if a.Status == ApprovalPending && a.ExpiresAt <= now.Unix() {
		a.Status, a.Reason, a.DecidedAt = ApprovalRejected, rejectedExpired, a.ExpiresAt
	}
}

// expired reports whether a was rejected because approval_ttl passed
// (expire), and not by an approver, whose reason may be any text.
func (a *Approval) expired() bool {
	return a.Status == ApprovalRejected && a.Reason == rejectedExpired && a.DecidedAt == a.ExpiresAt
}

// pruneApprovals drops the approvals whose decision answered its call
// (Used) at least ttl ago, but those remembered, which a handoff clears:
// until then deciding one again is 409, afterwards 404. It reports
// whether it dropped any; list is changed in place.
func pruneApprovals(list []Approval, ttl time.Duration, now time.Time) ([]Approval, bool) {
	out := list[:0]
	for _, a := range list {
		at := a.DecidedAt
		if at == 0 {
			at = a.ExpiresAt // decided before decidedAt was recorded
		}
		if a.Used && !(a.Remember && a.Status == ApprovalApproved) && time.Unix(at, 0).Add(ttl).Before(now) {
			continue
		}
		out = append(out, a)
	}
	return out, len(out) != len(list)
}

// decide applies d to the approval in list whose id is d.ID.
func decide(list []Approval, d Decision, now time.Time) (*Approval, error) {
	for i := range list {
		a := &list[i]
		if a.ID != d.ID {
			continue
		}
		a.expire(now)
		if a.Status != ApprovalPending {
			return nil, fmt.Errorf("approval %s is %s: %w", d.ID, a.Status, ErrApprovalDecided)
		}
		a.Status, a.Reason, a.Remember, a.DecidedAt = ApprovalRejected, d.Reason, d.Remember, now.Unix()
		if d.Approve {
			a.Status = ApprovalApproved
		}
		return a, nil
	}
	return nil, fmt.Errorf("approval %s: %w", d.ID, ErrApprovalNotFound)
}

// PendingApprovals returns the session's approvals still waiting, in the
// order of the paused turn's calls, as the pause listed them: a turn's
// calls may be checked concurrently (a pre_tool_call hook), and their
// approvals stored as each check ended. Those asked inside a sub-agent
// come after, in the order they were asked.
func (s *Session) PendingApprovals() []Approval {
	out := []Approval{}
	now := time.Now()
	for _, a := range s.Approvals {
		a.expire(now)
		if a.Status == ApprovalPending {
			out = append(out, a.public())
		}
	}
	pos := map[string]int{}
	if i := lastAssistant(s.Messages); i >= 0 {
		for j, c := range s.Messages[i].ToolCalls {
			pos[c.ID] = j
		}
	}
	at := func(a Approval) int {
		if j, ok := pos[a.ToolCallID]; ok {
			return j
		}
		return len(pos)
	}
	slices.SortStableFunc(out, func(a, b Approval) int { return cmp.Compare(at(a), at(b)) })
	return out
}

// DecideApproval records a decision on one approval of a session, under the
// session's lock; it runs nothing (the session's next request resumes).
// ErrApprovalNotFound when the session (of this principal) has no such
// approval, ErrApprovalDecided when it was decided before.
func (r *Runner) DecideApproval(ctx context.Context, key SessionKey, d Decision) (Approval, error) {
	if r.opts.Store == nil {
		return Approval{}, fmt.Errorf("approval %s: %w", d.ID, ErrApprovalNotFound)
	}
	sess, lease, err := r.acquire(ctx, key)
	if err != nil {
		return Approval{}, fmt.Errorf("acquire session: %w", err)
	}
	defer func() { _ = r.opts.Store.Release(context.WithoutCancel(ctx), key, lease) }()
	list := cloneApprovals(sess.Approvals)
	a, err := decide(list, d, time.Now())
	if err != nil {
		return Approval{}, err
	}
	w := Write{ActiveAgent: sess.ActiveAgent, Approvals: list, SetApprovals: true, Release: true}
	if _, err := r.opts.Store.Save(ctx, key, lease, w); err != nil {
		return Approval{}, fmt.Errorf("save decision: %w", err)
	}
	return a.public(), nil
}

func cloneApprovals(list []Approval) []Approval {
	return append([]Approval(nil), list...)
}

// applyDecisions records a request's `approvals` on the run's approvals.
func (rn *run) applyDecisions(ds []Decision) error {
	now := time.Now()
	for _, d := range ds {
		if _, err := decide(rn.approvals, d, now); err != nil {
			return err
		}
		rn.approvalsDirty = true
	}
	return nil
}

// openApprovals reports whether the session has approvals not yet used.
func (rn *run) openApprovals() bool {
	for _, a := range rn.approvals {
		if !a.Used {
			return true
		}
	}
	return false
}

// moveOn answers the open calls of a paused turn when the request brings a
// new message instead of the decisions, so that the transcript stays whole
// and the run goes on with the new message. An approval still pending is
// rejected (`the user sent a new message instead`), one past
// approval_ttl is expired, and one the approver rejected keeps the
// approver's reason: each such call is answered with its rejection and
// counted, on the request's span (the call's own span ended with the
// pause). A call the approver approved still runs: its approval is left
// for the permission gate, and the new message is held back (rn.held)
// until resumeTurn has run it, so that its result comes first. Other open
// calls the gateway would run (a handoff that waited) are answered with
// the new-message rejection.
func (rn *run) moveOn(ctx context.Context) {
	ai := lastAssistant(rn.history)
	if ai < 0 {
		return
	}
	answered := map[string]bool{}
	for _, m := range rn.history[ai+1:] {
		if m.Role == RoleTool {
			answered[m.ToolCallID] = true
		}
	}
	var results []Message
	keep := map[string]bool{} // the approvals of approved calls, left for the gate
	for _, c := range rn.history[ai].ToolCalls {
		if answered[c.ID] {
			continue
		}
		msg := rejectedNewMessage
		if a := rn.approvalFor(c.ID); a != nil {
			now := time.Now()
			a.expire(now)
			decision := DecisionRejected
			switch {
			case a.Status == ApprovalApproved:
				keep[a.ID] = true
				continue
			case a.Status == ApprovalPending:
				a.Status, a.Reason, a.DecidedAt = ApprovalRejected, rejectedNewMessage, now.Unix()
			case a.expired():
				// One past approval_ttl was rejected as expired, whatever
				// the request brings: its call's result and count say so.
				decision, msg = DecisionExpired, a.Reason
			default:
				msg = cmp.Or(a.Reason, rejectedDefault)
			}
			// Counted once a save keeps it: a run that keeps nothing (an
			// input guardrail that trips) leaves the approval pending.
			rn.session.deferDecision(ctx, c.Function.Name, decision)
		} else if rn.classify(c).kind == callClient {
			continue
		} else {
			rn.dropNested(ctx, c.ID)
		}
		results = append(results, toolResult(c.ID, toolError(codeRejected, msg)))
	}
	for i := range rn.approvals {
		if !keep[rn.approvals[i].ID] {
			rn.approvals[i].Used = true
		}
	}
	rn.approvalsDirty = true
	if len(keep) > 0 {
		rn.held, rn.transcript = rn.transcript, results
		return
	}
	rn.transcript = append(results, rn.transcript...)
}

// approvalFor returns the unused approval of a tool call id of this run
// (not of a sub-agent it asked, whose calls' ids are the sub-agent's model's),
// or nil. The caller holds apprMu or runs alone.
func (rn *run) approvalFor(callID string) *Approval {
	for i := range rn.approvals {
		if a := &rn.approvals[i]; a.ToolCallID == callID && !a.Used && a.under(rn.nest) {
			return a
		}
	}
	return nil
}

// notifyApprovals POSTs the approvals this run's pause created to the
// graph's on_approval_required hook, once the pause is saved. It runs on a
// goroutine of its own, bounded by the hook's timeout, so that the reply
// does not wait for it (Runner.Wait waits for it); a failure is logged,
// never fatal. A later request that finds them still pending does not
// call it again.
func (rn *run) notifyApprovals(ctx context.Context) {
	h := rn.graph.OnApprovalRequired
	if rn.info.Parent != nil {
		return // a sub-agent's pause is its session run's, which notifies
	}
	if h == nil || rn.opts.Hooks == nil || len(rn.asked) == 0 {
		return
	}
	payload := approvalNotice{SessionID: rn.req.SessionID, Principal: rn.req.Principal, Graph: rn.graph.Name, Approvals: rn.asked}
	hooks, log := rn.opts.Hooks, rn.log
	// A WaitGroup may not grow once Wait may be waiting on it: a pause
	// saved while the gateway shuts down is logged, not notified.
	rn.notifyMu.Lock()
	if rn.notifyDone {
		rn.notifyMu.Unlock()
		log.Warn("on_approval_required not called: shutting down", "session", payload.SessionID)
		return
	}
	rn.notifying.Add(1)
	rn.notifyMu.Unlock()
	// The reply may be sent before it answers; a Wait whose time is up
	// cancels it.
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(rn.notifyStop, cancel)
	go func() {
		defer rn.notifying.Done()
		defer stop()
		defer cancel()
		if err := hooks.Call(ctx, h, payload); err != nil {
			log.Warn("on_approval_required hook failed", "session", payload.SessionID, "url", redact.URL(h.URL), "err", err)
		}
	}()
}

// approvalNotice is what on_approval_required is POSTed.
type approvalNotice struct {
	SessionID string     `json:"sessionId"`
	Principal string     `json:"principal"`
	Graph     string     `json:"graph"`
	Approvals []Approval `json:"approvals"`
}

// Wait waits until the Runner's on_approval_required calls in flight are
// done (each is bounded by its hook's timeout), or until ctx is done, when
// it cancels those still in flight and waits for them to return. No call
// starts once Wait has begun. Call it before the process (or a test) ends,
// once the Runner serves no more requests.
func (r *Runner) Wait(ctx context.Context) {
	r.notifyMu.Lock()
	r.notifyDone = true
	r.notifyMu.Unlock()
	done := make(chan struct{})
	go func() {
		r.notifying.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		r.stopNotify()
		<-done
	}
}
