package providers

import (
	"context"
	"errors"
	"net/http"
	goruntime "runtime"
	"testing"
)

// A context derived from an attemptCtx (net/http's, for each request) is
// cancelled with the call's through the context package's own
// bookkeeping, not a goroutine per context watching the parent.
func TestAttemptCtxCancelsWithoutAGoroutine(t *testing.T) {
	parent, cancel := context.WithCancelCause(t.Context())
	actx := &attemptCtx{Context: parent, a: &attempt{}}
	before := goruntime.NumGoroutine()
	var derived []context.Context
	for range 50 {
		ctx, stop := context.WithCancel(actx)
		defer stop()
		derived = append(derived, ctx)
	}
	// A goroutine each would be 50 more; other tests' ending goroutines
	// may move the count by a few.
	if n := goruntime.NumGoroutine(); n >= before+25 {
		t.Fatalf("%d goroutines after deriving 50 contexts, %d before: one each", n, before)
	}
	why := errors.New("call timed out")
	cancel(why)
	for _, ctx := range derived {
		<-ctx.Done()
		if !errors.Is(context.Cause(ctx), why) {
			t.Fatalf("cause %v, want the call's", context.Cause(ctx))
		}
	}
	if got := actx.Value(attemptKey{}); got != actx.a {
		t.Fatalf("attemptKey gives %v, want the attempt", got)
	}
}

// A request that does not come through a call has no attempt to send it.
func TestAttemptDoerWithoutAttempt(t *testing.T) {
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://127.0.0.1:1/v1/chat/completions", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (attemptDoer{}).Do(req); !errors.Is(err, errNoAttempt) {
		t.Fatalf("err %v, want errNoAttempt", err)
	}
}
