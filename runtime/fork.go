package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
)

// A session's history only grows between the runs that use it, except when
// an input filter rewrites it at a handoff. A Point remembers where a
// session stood after a run, so that a later request may continue from
// there: in the session itself while nothing came after the point, or in a
// new session that starts as a copy of the history up to it (a fork; the
// Responses API's previous_response_id to an older response).

// Point is where a session stood after a run.
type Point struct {
	// Version is the session's version right after the run.
	Version int64 `json:"version"`
	// Length is how many messages its history held.
	Length int `json:"length"`
	// Agent is the agent that answered last.
	Agent string `json:"agent"`
	// Last identifies the last message of the history then, so that a fork
	// can tell the history it copies is still the one of the point.
	Last string `json:"last"`
}

// ErrMoved: the session has moved past the point a request asked to continue
// from (Request.At).
var ErrMoved = errors.New("session moved past the point")

// ErrPointGone: a fork's point is no longer in its session's history (an
// input filter rewrote it since).
var ErrPointGone = errors.New("session point no longer in its history")

// fingerprint identifies a message by what a rewrite would change: its
// role, text, tool calls and the call it answers.
func fingerprint(m *Message) string {
	h := sha256.New()
	write := func(s string) {
		fmt.Fprintf(h, "%d:%s;", len(s), s)
	}
	write(m.Role)
	write(m.Content)
	write(m.ToolCallID)
	for _, c := range m.ToolCalls {
		write(c.ID)
		write(c.Function.Name)
		write(c.Function.Arguments)
	}
	if m.Handoff != nil {
		write(m.Handoff.From)
		write(m.Handoff.To)
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// pointAfter is the point of a session whose history is history followed by
// transcript, at version.
func pointAfter(history, transcript []Message, version int64, agent string) Point {
	p := Point{Version: version, Length: len(history) + len(transcript), Agent: agent}
	switch {
	case len(transcript) > 0:
		p.Last = fingerprint(&transcript[len(transcript)-1])
	case len(history) > 0:
		p.Last = fingerprint(&history[len(history)-1])
	}
	return p
}

// holds reports whether sess still stands at the point although its version
// moved: writes that add no message (a decision on an approval) leave the
// conversation where the point saw it, so continuing from there is no fork.
func (p Point) holds(sess *Session) bool {
	n := len(sess.Messages)
	return p.Length > 0 && p.Length == n && fingerprint(&sess.Messages[n-1]) == p.Last
}

// Fork starts the session dst as a copy of src's history up to the point
// at, with at's agent active. dst must be a session nobody else uses (a
// fresh id): it is written under its own lock. ErrNotFound when src is
// gone, ErrPointGone when its history no longer holds the point.
func (r *Runner) Fork(ctx context.Context, src SessionKey, at Point, dst SessionKey) error {
	if r.opts.Store == nil {
		return fmt.Errorf("fork session: %w: sessions are not configured", ErrInvalidRequest)
	}
	sess, err := r.opts.Store.Load(ctx, src)
	if err != nil {
		return fmt.Errorf("fork session: %w", err)
	}
	if at.Length <= 0 || at.Length > len(sess.Messages) || fingerprint(&sess.Messages[at.Length-1]) != at.Last {
		return fmt.Errorf("fork session: %w", ErrPointGone)
	}
	_, lease, err := r.opts.Store.Acquire(ctx, dst)
	if err != nil {
		return fmt.Errorf("fork session: %w", err)
	}
	if _, err := r.opts.Store.Save(ctx, dst, lease, Write{Messages: sess.Messages[:at.Length], Replace: true, ActiveAgent: at.Agent, Release: true}); err != nil {
		_ = r.opts.Store.Release(context.WithoutCancel(ctx), dst, lease)
		return fmt.Errorf("fork session: %w", err)
	}
	return nil
}

// Seed starts the session dst with msgs as its history, as if earlier turns
// had written them: a client that sends a whole conversation to start a new
// session (a Responses request without previous_response_id) keeps it all,
// where a run would keep only the input after its last assistant message.
// dst must be a session nobody else uses (a fresh id).
func (r *Runner) Seed(ctx context.Context, dst SessionKey, msgs []Message) error {
	if r.opts.Store == nil {
		return fmt.Errorf("seed session: %w: sessions are not configured", ErrInvalidRequest)
	}
	// The client's history is its own, unchecked by any run: a tool result
	// in it that answers no call is refused as a stateless request's is.
	if err := checkResults(nil, msgs, 0); err != nil {
		return err
	}
	_, lease, err := r.opts.Store.Acquire(ctx, dst)
	if err != nil {
		return fmt.Errorf("seed session: %w", err)
	}
	if _, err := r.opts.Store.Save(ctx, dst, lease, Write{Messages: msgs, Replace: true, Release: true}); err != nil {
		_ = r.opts.Store.Release(context.WithoutCancel(ctx), dst, lease)
		return fmt.Errorf("seed session: %w", err)
	}
	return nil
}
