package providers

import (
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Connections a burst leaves behind. A provider's transport keeps up to
// MaxIdleConnsPerHost (256) connections idle for IdleConnTimeout (90 s),
// each with two goroutines and its buffers: after 5,000 streams ended, a
// gateway that nobody called again held 512 goroutines more than before
// them, for a minute and a half, unless the provider closed its side
// (issue 22: "goroutines back to baseline after"). net/http closes only
// all of a transport's idle connections at once, so idleTrim does that
// when it is cheap: once more than trimFloor connections were dialed since
// the last trim, and then a whole trimQuiet passed without a request to
// the provider. A provider used now and then keeps its few connections
// for the transport's timeout; one in steady use is never trimmed; after
// a burst, the first quiet second empties the pool. And until the next
// request, net/http closes each connection that comes free instead of
// keeping it (Transport.CloseIdleConnections), so streams still open at
// the trim close theirs when they end.
const (
	trimFloor = 16
	trimQuiet = time.Second
)

// idleTrim closes a transport's idle connections after a burst (see
// trimFloor). Its timer runs only while it is armed: an idle gateway
// wakes for nothing.
type idleTrim struct {
	closeIdle func()
	// quiet is how long no request must be sent before a trim (trimQuiet;
	// tests shorten it before the first dial).
	quiet time.Duration
	// dials counts connections dialed since the last trim; sent, requests
	// since the last check.
	dials atomic.Int64
	sent  atomic.Int64
	armed atomic.Bool

	mu     sync.Mutex
	timer  *time.Timer
	closed bool
}

// newIdleTrim trims tr's idle connections: it counts tr's dials (tr must
// not have been used yet) and closes its idle connections as trimFloor
// says. Requests are counted by whoever sends them (sending).
func newIdleTrim(tr *http.Transport) *idleTrim {
	t := &idleTrim{closeIdle: tr.CloseIdleConnections, quiet: trimQuiet}
	dial := tr.DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err == nil {
			t.dialed()
		}
		return c, err
	}
	return t
}

// sending counts a request about to be sent.
func (t *idleTrim) sending() {
	t.sent.Add(1)
}

// dialed counts a new connection, and arms the trim once there are more
// than trimFloor.
func (t *idleTrim) dialed() {
	if t.dials.Add(1) > trimFloor && t.armed.CompareAndSwap(false, true) {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.closed {
			return
		}
		if t.timer == nil {
			t.timer = time.AfterFunc(t.quiet, t.check)
		} else {
			t.timer.Reset(t.quiet)
		}
	}
}

// check runs trimQuiet after the trim was armed, and again every
// trimQuiet while requests are sent: it trims at the first one without.
func (t *idleTrim) check() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	if t.sent.Swap(0) > 0 {
		t.timer.Reset(t.quiet)
		return
	}
	t.dials.Store(0)
	t.armed.Store(false)
	t.closeIdle()
}

// stop stops the timer for good (Registry.Close).
func (t *idleTrim) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	if t.timer != nil {
		t.timer.Stop()
	}
}
