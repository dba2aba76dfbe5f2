package freshstack

import (
	"errors"
	"runtime"
	"testing"
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
