package cache

import (
	"slices"

	"github.com/switchboard-ai/switchboard/runtime"
)

// Stores copy messages on the way in, so that a caller that edits what it
// saved never changes what the store holds, and share them on the way out
// (see runtime.Store): what a store holds is never written to in place, it
// only grows past the length of every slice handed out (whose capacity is
// clipped to that length) or is replaced.

// cloneMessage returns a copy of m that shares no memory with it. Strings are
// immutable and need no copy.
func cloneMessage(m runtime.Message) runtime.Message {
	if m.Parts != nil {
		m.Parts = slices.Clone(m.Parts)
	}
	if m.ToolCalls != nil {
		m.ToolCalls = slices.Clone(m.ToolCalls)
	}
	if m.Handoff != nil {
		h := *m.Handoff
		m.Handoff = &h
	}
	return m
}

// appendClones appends copies of src to dst. Most messages are plain text,
// which a struct copy already separates (strings are immutable): all are
// copied at once, and only those holding parts, tool calls or a marker are
// then deep-copied. One bulk copy is several times faster than appending
// message by message (a Replace copies a whole transcript).
func appendClones(dst, src []runtime.Message) []runtime.Message {
	n := len(dst)
	dst = append(dst, src...)
	for i := n; i < len(dst); i++ {
		if m := &dst[i]; m.Parts != nil || m.ToolCalls != nil || m.Handoff != nil {
			*m = cloneMessage(*m)
		}
	}
	return dst
}

// spare is the room a copy leaves after its messages, so that the next
// turn's save appends in place.
const spare = 8

// cloneMessages returns a deep copy of src; nil for an empty src, so that a
// session never written loads with nil Messages from every backend.
func cloneMessages(src []runtime.Message) []runtime.Message {
	if len(src) == 0 {
		return nil
	}
	return appendClones(make([]runtime.Message, 0, len(src)+spare), src)
}
