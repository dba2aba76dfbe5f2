package freshstack

import (
	"bytes"
	"errors"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"
)

func TestRunCallsFnAndWaits(t *testing.T) {
	x := 0
	Run(func() { x = 42 })
	if x != 42 {
		t.Fatalf("x = %d after Run, want 42", x)
	}
}

func TestRunRaisesFnsPanicInTheCaller(t *testing.T) {
	want := errors.New("boom")
	got := func() (p any) {
		defer func() { p = recover() }()
		Run(func() { panic(want) })
		return nil
	}()
	if got != want {
		t.Fatalf("recovered %v, want %v", got, want)
	}
	nilPanic := func() (p any) {
		defer func() { p = recover() }()
		Run(func() { panic(nil) })
		return nil
	}()
	var pe *runtime.PanicNilError
	if err, ok := nilPanic.(error); !ok || !errors.As(err, &pe) {
		t.Fatalf("panic(nil) recovered as %v, want a *runtime.PanicNilError", nilPanic)
	}
}

func TestRunGoexitReturns(t *testing.T) {
	ran := false
	Run(func() { ran = true; runtime.Goexit() })
	if !ran {
		t.Fatal("fn did not run")
	}
	// The worker ended with fn; the next call gets another.
	x := 0
	Run(func() { x = 1 })
	if x != 1 {
		t.Fatal("the call after a Goexit did not run")
	}
}

// TestRunKeepsTheCallerShallow is the point of Run: a deep fn does not
// grow the caller's stack. It compares the stack memory in use per parked
// goroutine that ran a 28 KB frame through Run with one that ran it in
// place (32 KB): at least four times less. (The figure through Run also
// holds stacks freed to the runtime's pool, and -race starts goroutines
// larger, so it is not compared with a fixed size.)
func TestRunKeepsTheCallerShallow(t *testing.T) {
	const n = 200
	inUse := func(viaRun bool) uint64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		before := ms.StackInuse
		release, parked := make(chan struct{}), make(chan struct{}, n)
		for range n {
			go func() {
				if viaRun {
					Run(func() { deep(1) })
				} else {
					deep(1)
				}
				parked <- struct{}{}
				<-release
			}()
		}
		for range n {
			<-parked
		}
		settled(t) // the workers gone: only the callers' stacks are left
		runtime.ReadMemStats(&ms)
		close(release)
		return (ms.StackInuse - before) / n
	}
	inPlace, viaRun := inUse(false), inUse(true)
	if inPlace < 28<<10 {
		t.Fatalf("a goroutine that ran deep in place holds %d bytes of stack; the test's frame is too small", inPlace)
	}
	if viaRun > inPlace/4 {
		t.Fatalf("a goroutine that ran deep through Run holds %d bytes of stack, in place %d: want at most a quarter", viaRun, inPlace)
	}
}

//go:noinline
func deep(i int) byte {
	var frame [28 << 10]byte
	frame[i] = byte(i)
	return frame[i+1]
}

// goid returns the calling goroutine's id, from its stack's first line.
func goid() uint64 {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	buf, _, _ = bytes.Cut(bytes.TrimPrefix(buf, []byte("goroutine ")), []byte(" "))
	id, _ := strconv.ParseUint(string(buf), 10, 64)
	return id
}

// TestCallsReuseAWorker: calls one after another run on the goroutine of
// the one before (the point of the pool: its stack has grown already),
// not each on a new one. A worker retires after idleFor idle, which a
// very slow machine could reach between two calls, so a few are allowed.
func TestCallsReuseAWorker(t *testing.T) {
	seen := map[uint64]bool{}
	for range 100 {
		Run(func() { seen[goid()] = true })
	}
	if len(seen) > 10 {
		t.Fatalf("100 calls in a row ran on %d goroutines, want about one", len(seen))
	}
	// A panic does not cost the worker either.
	func() {
		defer func() { _ = recover() }()
		Run(func() { seen[goid()] = true; panic("boom") })
	}()
	if len(seen) > 11 {
		t.Fatalf("the call that panicked ran on a new goroutine")
	}
}

// TestWorkersEndWhenIdle: as many workers as concurrent calls, and all of
// them gone once idle, goroutines back to their count before.
func TestWorkersEndWhenIdle(t *testing.T) {
	waitGoroutines := func(want int) int {
		deadline := time.Now().Add(5 * time.Second)
		for {
			n := runtime.NumGoroutine()
			if n <= want || time.Now().After(deadline) {
				return n
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	base := settled(t)
	const n = 50
	release := make(chan struct{})
	var started, finished sync.WaitGroup
	started.Add(n)
	for range n {
		finished.Go(func() { Run(func() { started.Done(); <-release }) })
	}
	started.Wait()
	if got := runtime.NumGoroutine(); got < base+2*n {
		t.Fatalf("%d goroutines with %d calls running, want at least %d (a caller and a worker each)", got, n, base+2*n)
	}
	close(release)
	finished.Wait()
	if got := waitGoroutines(base); got > base {
		t.Fatalf("%d goroutines 5 s after the calls, want %d as before them", got, base)
	}
}

// TestIdleRacesCalls calls Run from several goroutines at about the
// moment their workers retire, under -race: no call is lost (each runs
// once) and no goroutine is left.
func TestIdleRacesCalls(t *testing.T) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	ran := 0
	for g := range 4 {
		wg.Go(func() {
			for i := range 8 {
				Run(func() { mu.Lock(); ran++; mu.Unlock() })
				time.Sleep(idleFor - 2*time.Millisecond + time.Duration((g+i)%5)*time.Millisecond)
			}
		})
	}
	wg.Wait()
	if ran != 32 {
		t.Fatalf("%d calls ran, want 32", ran)
	}
}

// settled waits until no worker is idle and the goroutine count has
// stopped falling, and returns it.
func settled(t *testing.T) int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		workers.mu.Lock()
		idle := workers.head != nil
		workers.mu.Unlock()
		if !idle {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	n := runtime.NumGoroutine()
	for time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		m := runtime.NumGoroutine()
		if m == n {
			return n
		}
		n = m
	}
	t.Fatal("idle workers still there after 5 s")
	return 0
}
