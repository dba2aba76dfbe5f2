package gctune

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestPolicyNext(t *testing.T) {
	p := Policy{Base: 100, Max: 400}
	for _, tc := range []struct {
		name string
		cur  int
		kept float64
		want int
	}{
		{"all kept goes to the max", 100, 1, 400},
		{"half kept goes to the max", 200, 0.5, 400},
		{"at the max stays", 400, 0.9, 400},
		{"between a quarter and a half stays", 200, 0.3, 200},
		{"a quarter stays", 200, 0.25, 200},
		{"under a quarter halves", 400, 0.2, 200},
		{"the live heap shrank halves", 200, -0.5, 100},
		{"never under the base", 100, 0, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := p.Next(tc.cur, tc.kept); got != tc.want {
				t.Errorf("Next(%d, %v) = %d, want %d", tc.cur, tc.kept, got, tc.want)
			}
		})
	}
}

// TestTunerFollowsCollections grows the heap with memory it keeps, then
// drops it and makes garbage, collecting between the steps: GOGC rises to
// the policy's max and comes back to its base, and stop restores what GOGC
// was before.
func TestTunerFollowsCollections(t *testing.T) {
	before := debug.SetGCPercent(70)
	defer debug.SetGCPercent(before)

	type report struct {
		cycles        uint64
		gogc, inForce int
	}
	reports := make(chan report, 1024)
	stop := start(Policy{Base: 100, Max: 400}, func(cycles uint64, gogc int) {
		// Only the finalizer goroutine runs the tuner: nothing changes
		// GOGC between its setting it and this call.
		select {
		case reports <- report{cycles, gogc, gogcInForce()}:
		default: // the test reads every report; a full channel is its failure
		}
	})
	// collect forces a collection and returns GOGC once the tuner has
	// followed it (and any collection the allocations started). A sentinel
	// allocated while a collection marks survives that one, so the tuner
	// may follow only the next: collect forces one again while it waits.
	cycles := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	collect := func() int {
		t.Helper()
		runtime.GC()
		metrics.Read(cycles)
		n := cycles[0].Value.Uint64()
		again := time.NewTicker(50 * time.Millisecond)
		defer again.Stop()
		timeout := time.After(10 * time.Second)
		for {
			select {
			case r := <-reports:
				if r.gogc < 100 || r.gogc > 400 {
					t.Fatalf("GOGC %d, outside the policy's 100 to 400", r.gogc)
				}
				if r.inForce != r.gogc {
					t.Fatalf("the runtime's GOGC is %d, the tuner's %d", r.inForce, r.gogc)
				}
				if r.cycles >= n {
					return r.gogc
				}
			case <-again.C:
				runtime.GC()
			case <-timeout:
				t.Fatalf("the tuner did not follow collection %d", n)
			}
		}
	}

	var kept [][]byte
	gogc := 0
	for step := 0; step < 20 && gogc != 400; step++ {
		for range 64 {
			kept = append(kept, make([]byte, 64<<10)) // 4 MB a step, all kept
		}
		gogc = collect()
	}
	if gogc != 400 {
		t.Fatalf("GOGC %d after the heap grew with memory kept, want 400", gogc)
	}
	runtime.KeepAlive(kept) // what was kept is garbage from here

	var sink []byte
	for step := 0; step < 20 && gogc != 100; step++ {
		for range 256 {
			sink = make([]byte, 64<<10) // 16 MB a step, none kept
		}
		gogc = collect()
	}
	runtime.KeepAlive(sink)
	if gogc != 100 {
		t.Fatalf("GOGC %d after the collections found garbage, want 100", gogc)
	}

	stop()
	if got := debug.SetGCPercent(before); got != 70 {
		t.Errorf("GOGC %d after stop, want 70, what it was before Start", got)
	}
}

// gogcInForce is the runtime's GOGC, as /metrics shows it
// (go_gc_gogc_percent).
func gogcInForce() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}

// TestAutoLeavesAGOGCTheOperatorSet: with GOGC in the environment the
// tuner does not start, and GOGC stays what the operator set; without it,
// the tuner runs from Go's default, and stop restores what was before.
func TestAutoLeavesAGOGCTheOperatorSet(t *testing.T) {
	before := debug.SetGCPercent(50)
	defer debug.SetGCPercent(before)
	env := func(gogc string) func(string) string {
		return func(k string) string {
			if k == "GOGC" {
				return gogc
			}
			return ""
		}
	}

	stop := Auto(env("50"))
	if got := gogcInForce(); got != 50 {
		t.Errorf("GOGC %d with GOGC=50 in the environment, want 50", got)
	}
	stop()
	if got := gogcInForce(); got != 50 {
		t.Errorf("GOGC %d after stop, want 50", got)
	}

	stop = Auto(env(""))
	// The tuner starts at Default().Base; a collection meanwhile may have
	// moved it already, within the policy.
	if p, got := Default(), gogcInForce(); got < p.Base || got > p.Max {
		t.Errorf("GOGC %d with the tuner started, want %d to %d", got, p.Base, p.Max)
	}
	stop()
	if got := gogcInForce(); got != 50 {
		t.Errorf("GOGC %d after stop, want 50, what it was before", got)
	}
}
