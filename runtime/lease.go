package runtime

import (
	"context"
	"errors"
	"sync"
	"time"
)

// keepLease renews the session lease every third of its TTL while the run
// lasts. When the lease is lost the run is cancelled with ErrLeaseLost, so
// it stops without saving. The returned stop waits for a renewal in flight.
func (r *Runner) keepLease(ctx context.Context, key SessionKey, lease Lease, cancel context.CancelCauseFunc) (stop func()) {
	every := lease.TTL / 3
	if every <= 0 {
		return func() {}
	}
	var mu sync.Mutex
	stopped := false
	var t *time.Timer
	t = time.AfterFunc(every, func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		err := r.opts.Store.Renew(context.WithoutCancel(ctx), key, lease)
		if errors.Is(err, ErrLeaseLost) {
			cancel(ErrLeaseLost)
			return
		}
		if err != nil {
			// A store hiccup: the lease still has two thirds of its time
			// left, so the next renewal, one period on, can still save it.
			r.log.Warn("renew session lease", "session", key.ID, "err", err)
		}
		t.Reset(every)
	})
	return func() {
		mu.Lock()
		stopped = true
		t.Stop()
		mu.Unlock()
	}
}
