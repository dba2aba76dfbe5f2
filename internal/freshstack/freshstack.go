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
// where a reverse proxy holds 8 KB (issue 22). Run does such a moment on a
// new goroutine, whose stack goes back to the runtime's pool when it ends,
// and waits for it: the caller's goroutine never goes that deep.
package freshstack

// Run calls fn on a new goroutine and returns when fn has returned. A
// panic in fn is raised again in the caller, with the same value, so that
// a recovery around Run (gin's, net/http's) sees it as if fn had run in
// place. Should fn call runtime.Goexit, Run returns as if fn had.
func Run(fn func()) {
	done := make(chan any, 1)
	go call(fn, done)
	if p := <-done; p != nil {
		panic(p)
	}
}

// call runs fn and sends what it panicked with, nil if it returned.
func call(fn func(), done chan<- any) {
	returned := false
	defer func() {
		if returned {
			done <- nil
			return
		}
		// Not nil: since Go 1.21, panic(nil) panics with a
		// *runtime.PanicNilError.
		done <- recover()
	}()
	fn()
	returned = true
}
