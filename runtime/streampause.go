package runtime

import "context"

// A streamed answer's deltas reach the client as the provider produces
// them, and a renderer that sent each one on its own made a write to the
// client for every delta. Under load a provider's chunks come several at a
// time (the gateway read them later than they were sent), and a reverse
// proxy relays what one read brought in one write: the gateway made a
// system call for each (issue 22). So a Model that can tell when it has
// handed over every delta at hand, and is about to wait for more, says so
// (StreamPauser); its deltas are then EventDelta with Batched set, and the
// run emits EventFlush when the model pauses, and when the call ends
// whatever the model said. A Model that does not take the pauser has each
// delta sent on its own, as before.

// pauseKey is the key under which a streamed model call's context holds
// its run.
type pauseKey struct{}

// pauseCtx is the context of a streamed model call.
type pauseCtx struct {
	context.Context
	rn *run
}

// Value returns the run for pauseKey, else the call's context's value.
func (c *pauseCtx) Value(key any) any {
	if key == (pauseKey{}) {
		return c.rn
	}
	return c.Context.Value(key)
}

// Pauser is what a streamed model call tells when it pauses
// (StreamPauser).
type Pauser interface {
	// Pause says that every delta at hand has been handed to onDelta and
	// the model is about to wait for more of its answer, or has read it
	// all.
	Pause()
}

// StreamPauser returns, for the context of a streamed model call
// (Model.Chat's), what the Model tells each time it has handed every
// delta it has at hand to onDelta and is about to wait for more of its
// answer, and once it has read its whole answer; nil for a call that is
// not streamed. Taking it is a promise to call Pause then: the deltas
// handed over since its last call may wait until it is called
// (Event.Batched). Call it from the goroutine that calls onDelta.
func StreamPauser(ctx context.Context) Pauser {
	rn, _ := ctx.Value(pauseKey{}).(*run)
	if rn == nil {
		return nil
	}
	rn.pauser = true
	return rn
}

// pauseContext returns the context of the model call about to be made:
// for a streamed run, ctx with rn for StreamPauser. A model call's context
// is not kept past the call, but it is a fresh one each time all the same:
// something a call started could still hold the last one's.
func (rn *run) pauseContext(ctx context.Context) context.Context {
	rn.pauser = false
	if !rn.req.Stream {
		return ctx
	}
	return &pauseCtx{Context: ctx, rn: rn}
}

// Pause emits EventFlush if a delta has been held for it since the last:
// the run is its model call's Pauser. The interface holds the run itself,
// which every delta touches anyway; the run's method value, which it was,
// is an object of its own, which a stream that waited for its next chunk
// found gone cold at every pause (issue 22).
func (rn *run) Pause() {
	if rn.batched {
		rn.batched = false
		rn.emit(Event{Kind: EventFlush})
	}
}
