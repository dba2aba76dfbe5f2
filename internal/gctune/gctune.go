// Package gctune lets the collector run less often while the heap grows
// with memory that stays live, and as often as Go's default once
// collections find garbage again.
//
// With GOGC at 100 a collection starts each time the heap has doubled, and
// each marks everything live. A gateway opening thousands of long streams
// grows its heap by what those streams hold, and keeps nearly all of it:
// at 5,000 streams opened within two seconds, each collection of the ramp
// found 90% of the heap live, marked every open stream's objects and stack
// again, and took CPU from the streams being opened and served just then
// (issue 22: the gateway's first-chunk and chunk-gap p99 fell behind a
// reverse proxy's at every collection, and held with GOGC at 200).
// Garbage, not live memory, is what a higher GOGC costs: the heap may grow
// by GOGC% of the live heap before a collection, and only garbage fills
// that room. So the tuner raises GOGC while most of what was allocated
// between two collections is still live at the second (the room then
// fills with the new live memory it would have had to hold anyway), and
// lowers it back once most of it is garbage.
package gctune

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// Policy bounds the tuner: GOGC stays between Base and Max. It goes to Max
// after a collection that found at least half of what was allocated since
// the previous one still live: such a collection says the heap is growing
// with memory that stays (streams opening), and the next one will find the
// same; stepping up a doubling at a time spent a whole collection, the
// most costly of the ramp, at each step. It halves after a collection that
// found less than a quarter, down to Base: coming down a step at a time
// keeps a mixed load (streams open while short requests come and go) from
// swinging between the two.
type Policy struct {
	Base int // GOGC while collections find garbage: Go's default is 100
	Max  int // the most GOGC is raised to
}

// Default is the policy `switchboard serve` runs with: from Go's default
// up to four times it.
func Default() Policy { return Policy{Base: 100, Max: 400} }

// Next is the GOGC to run at after a collection that found kept (the live
// heap's growth over the bytes allocated since the previous collection)
// with GOGC at cur.
func (p Policy) Next(cur int, kept float64) int {
	switch {
	case kept >= 0.5:
		return p.Max
	case kept < 0.25:
		return max(cur/2, p.Base)
	}
	return min(max(cur, p.Base), p.Max)
}

// tuner follows the collections through a finalizer that arms itself
// again each time it runs: it runs once after every collection, on the
// runtime's finalizer goroutine, and needs no goroutine or timer of its
// own.
type tuner struct {
	policy Policy
	after  func(cycles uint64, gogc int)
	// mu keeps stop from restoring GOGC while a finalizer sets it.
	mu      sync.Mutex
	stopped bool
	samples []metrics.Sample // cycles, live heap, bytes allocated
	cur     int
	cycles  uint64
	live    uint64
	allocs  uint64
}

// Auto starts the tuner with the Default policy unless GOGC is set in the
// environment (getenv): an operator who set it chose the collector's pace,
// and stop is then a no-op. `switchboard serve` calls it.
func Auto(getenv func(string) string) (stop func()) {
	if getenv("GOGC") != "" {
		return func() {}
	}
	return Start(Default())
}

// Start runs the tuner from GOGC at p.Base until stop is called; stop sets
// GOGC back to what it was before Start. A process calls it once, where it
// starts (GOGC is the process's).
func Start(p Policy) (stop func()) { return start(p, nil) }

// start is Start with a function called after each collection the tuner
// followed, with the collections so far and GOGC then (for tests).
func start(p Policy, after func(cycles uint64, gogc int)) (stop func()) {
	t := &tuner{policy: p, cur: p.Base, after: after, samples: []metrics.Sample{
		{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/gc/heap/live:bytes"}, {Name: "/gc/heap/allocs:bytes"},
	}}
	prev := debug.SetGCPercent(p.Base)
	t.cycles, t.live, t.allocs = t.read()
	t.arm()
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if !t.stopped {
			t.stopped = true
			debug.SetGCPercent(prev)
		}
	}
}

// sentinel is what the finalizer hangs on. It holds a pointer so that it
// is never batched with other small objects into one block (the tiny
// allocator), whose finalizer would run only when all of them are garbage.
type sentinel struct{ _ *byte }

// arm allocates a sentinel that the next collection finds unreachable.
func (t *tuner) arm() {
	runtime.SetFinalizer(new(sentinel), func(*sentinel) {
		t.mu.Lock()
		if t.stopped {
			t.mu.Unlock()
			return
		}
		t.collected()
		t.arm()
		cycles, gogc := t.cycles, t.cur
		t.mu.Unlock()
		if t.after != nil {
			t.after(cycles, gogc)
		}
	})
}

// read refreshes the samples and returns the collections so far, the live
// heap the last one marked and the bytes allocated so far.
func (t *tuner) read() (cycles, live, allocs uint64) {
	metrics.Read(t.samples)
	return t.samples[0].Value.Uint64(), t.samples[1].Value.Uint64(), t.samples[2].Value.Uint64()
}

// collected runs after a collection. The finalizer may run late, or miss
// a collection (a sentinel allocated while one marks survives it): kept is
// then over the collections since the last run, as one.
func (t *tuner) collected() {
	cycles, live, allocs := t.read()
	if cycles > t.cycles && allocs > t.allocs {
		kept := (float64(live) - float64(t.live)) / float64(allocs-t.allocs)
		if next := t.policy.Next(t.cur, kept); next != t.cur {
			debug.SetGCPercent(next)
			t.cur = next
		}
	}
	t.cycles, t.live, t.allocs = cycles, live, allocs
}
