// Package freshstack runs the rare deep moments of a long-lived goroutine
// on a goroutine of their own, so that the long-lived one keeps a small
// stack.
//
// A goroutine's stack grows by doubling and, while the goroutine is in
// use, never shrinks back below what it needs: one moment past 7 KB deep
// (8 KB less the runtime's guard) and the goroutine keeps 16 KB to its end.
// A stream's handler waits for each chunk about 6.4 KB deep, but opening
// the upstream request (go-openai and net/http's client) goes to 10 KB and
// the flush that writes the response headers to 9.4 KB, once each: a
// handler that did them itself held 16 KB of stack for the whole stream
// where a reverse proxy holds 8 KB (issue 22). Run does such a moment on
// another goroutine and waits for it: the caller's goroutine never goes
// that deep.
//
// That goroutine is a worker kept for idleFor after its last call. A new
// goroutine starts with a 2 KB stack, and the moments Run is for grow it
// twice, to 8 KB, copying it each time: at 5,000 streams opened within two
// seconds those copies (and the fresh stacks they take) were 3% of the
// gateway's CPU. A worker keeps the stack it grew, so the next call finds
// it grown. Idle workers hold no resource but their stacks, shrink at
// every GC like any parked goroutine, and end once idle for idleFor: the
// pool is a cache, like a sync.Pool, which nothing observes but time.
package freshstack

import (
	"sync"
	"time"
)

// idleFor is how long a worker waits for its next call before it ends:
// long enough to carry a burst of requests from one call to the next,
// short enough that goroutines are back to their count soon after the
// burst. (The tests' leak checks ignore idle workers:
// testenv.IgnoreIdleWorkers.)
const idleFor = 100 * time.Millisecond

// Run calls fn on another goroutine and returns when fn has returned. A
// panic in fn is raised again in the caller, with the same value, so that
// a recovery around Run (gin's, net/http's) sees it as if fn had run in
// place. Should fn call runtime.Goexit, Run returns as if fn had.
func Run(fn func()) {
	w := workers.get()
	w.calls <- fn
	switch p := <-w.done; p {
	case nil:
		workers.put(w)
	case goexited:
		// The worker's goroutine has ended; it is not put back.
	default:
		workers.put(w)
		panic(p)
	}
}

// goexited is what a worker answers when fn called runtime.Goexit, which
// ended the worker's goroutine too.
var goexited = new(struct{ byte })

// worker is a goroutine that runs the calls sent to it, one at a time.
type worker struct {
	calls chan func() // buffered: Run sends without waiting for the worker
	done  chan any    // nil, fn's panic, or goexited
	idle  *time.Timer
	// prev and next link the worker into the idle list; in is set while
	// it is there.
	prev, next *worker
	in         bool
}

// pool is the list of idle workers, the last used first.
type pool struct {
	mu   sync.Mutex
	head *worker
}

// workers holds the idle workers of the process. A process-wide cache of
// goroutines, as sync.Pool is one of objects: which worker runs a call is
// never observable.
var workers pool

// get takes the idle worker used last, or starts one.
func (p *pool) get() *worker {
	p.mu.Lock()
	w := p.head
	if w != nil {
		p.unlink(w)
	}
	p.mu.Unlock()
	if w == nil {
		w = &worker{calls: make(chan func(), 1), done: make(chan any, 1)}
		go w.serve()
	}
	return w
}

// put makes w idle, first in the list.
func (p *pool) put(w *worker) {
	p.mu.Lock()
	w.next, w.prev, w.in = p.head, nil, true
	if p.head != nil {
		p.head.prev = w
	}
	p.head = w
	p.mu.Unlock()
}

// unlink takes w out of the list. p.mu is held.
func (p *pool) unlink(w *worker) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		p.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	}
	w.prev, w.next, w.in = nil, nil, false
}

// retire takes w out of the list if it is still idle. It reports false
// when a caller took it meanwhile: that caller is sending it a call.
func (p *pool) retire(w *worker) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !w.in {
		return false
	}
	p.unlink(w)
	return true
}

// serve runs calls until the worker has been idle for idleFor.
func (w *worker) serve() {
	w.idle = time.NewTimer(idleFor)
	w.idle.Stop()
	for fn := <-w.calls; fn != nil; fn = w.nextCall() {
		w.done <- w.run(fn)
	}
}

// nextCall waits for the next call and returns it, or nil once the worker
// has been idle for idleFor and left the list. Run puts the worker back
// after the call's answer, so the timer may go off before the worker is
// in the list, or after a caller took it out to send it a call: it is
// then waited for again.
func (w *worker) nextCall() func() {
	for {
		w.idle.Reset(idleFor)
		select {
		case fn := <-w.calls:
			w.idle.Stop()
			return fn
		case <-w.idle.C:
			if workers.retire(w) {
				return nil
			}
		}
	}
}

// run calls fn and returns what it panicked with, nil if it returned.
func (w *worker) run(fn func()) (p any) {
	returned := false
	defer func() {
		if returned {
			return
		}
		// Not nil: since Go 1.21, panic(nil) panics with a
		// *runtime.PanicNilError. A nil recover is runtime.Goexit,
		// which goes on to end this goroutine after this function.
		if p = recover(); p == nil {
			w.done <- goexited
		}
	}()
	fn()
	returned = true
	return nil
}
