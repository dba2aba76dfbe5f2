package gateway

import (
	"context"
	"net/http"
	"reflect"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/switchboard-ai/switchboard/internal/freshstack"
)

// A stream's client must keep taking its bytes (CONTRACT §14): a client
// that stops reading, with its socket buffers full, would otherwise block
// the run in a write for good, holding its session lock and its provider
// call. So every write of a stream has a deadline, server.stream_write_timeout
// from now (up to a sixteenth more: refreshDeadline), set on the
// connection (http.ResponseController): a write that
// cannot finish in time fails, and the run is cancelled as on a disconnect
// (session released, nothing of the step stored). net/http's own
// WriteTimeout is not used: it bounds a whole response, and would cut long
// streams that a client reads well.

// The run of a stream whose client failed a write is cancelled by net/http
// itself: the write of a response that fails on the connection (its
// deadline passed, or the client went away) cancels the connection's
// context, and so the request's, the run's. So the guard has no context of
// its own: a context with a child keeps a map of its children, and with
// the provider call's under it every open stream held two more contexts
// and maps than it needs (issue 22). TestSilentStreamClientIsDropped fails
// if a failed write no longer ends the run.

// streamGuard writes a stream's events under the write timeout.
type streamGuard struct {
	// What a write reads comes first, in one cache line (issue 22).
	//
	// w is what the stream writes to: gin's writer for the first write,
	// which sends the headers and records the status gin and the
	// telemetry middleware read after the handler, then net/http's own
	// under it (unwrapped). Gin's writer only counts the bytes, which no
	// one reads of a stream, and going through it touched the stream's
	// gin.Context at every chunk.
	w       http.ResponseWriter
	timeout time.Duration
	// deadline is the write deadline set on the connection; a write sets
	// a new one only once a sixteenth of the timeout has gone by since
	// (refreshDeadline).
	deadline time.Time
	started  bool // the first write, which sends the headers, is done
	held     bool // hold wrote what no flush has sent yet
	failed   bool
	// ctx is the context the stream's run must use: the request's, which
	// net/http cancels when a write fails.
	ctx context.Context
}

// guardStream returns the guard a stream's writes go through; serveRun
// runs the graph with its context and closes it when the run is answered.
// A renderer keeps its guard in itself: every chunk goes through both, and
// a stream that waited for its next chunk finds each object it touches
// gone cold (issue 22).
func (s *Server) guardStream(c *gin.Context) streamGuard {
	return streamGuard{ctx: c.Request.Context(), w: c.Writer, timeout: s.streamWriteTimeout()}
}

// streamWriteTimeout is server.stream_write_timeout, or its default.
func (s *Server) streamWriteTimeout() time.Duration {
	if t := s.cfg.Server.StreamWriteTimeout; t > 0 {
		return t
	}
	return 30 * time.Second
}

// streaming is a renderer that streams: its run uses its guard's context.
type streaming interface {
	// guard returns the stream's guard, nil when this reply is not a stream.
	guard() *streamGuard
}

// runContext returns the context r's run must use, and what to call when
// the run has been answered.
func runContext(c *gin.Context, r renderer) (context.Context, func()) {
	if st, ok := r.(streaming); ok {
		if g := st.guard(); g != nil {
			return g.ctx, g.close
		}
	}
	return c.Request.Context(), func() {}
}

// write sends b and flushes it within the timeout; once a write has failed
// the stream is over, and later writes are dropped.
//
// The first write also sends the response's headers, and net/http's
// header writer alone takes 3.4 KB of stack: from where the run writes a
// chunk, that is 9.4 KB deep, past the 8 KB the stream's goroutine
// otherwise keeps to its end. So the first write is done aside
// (freshstack); the later ones, 7 KB deep, are not.
func (g *streamGuard) write(b []byte) {
	if g.failed {
		return
	}
	if !g.started {
		g.started = true
		freshstack.Run(func() { g.send(b) })
		g.unwrap()
		return
	}
	g.send(b)
}

// hold writes b without flushing it: it leaves with the next write, or
// at flush. Events made at one moment (what ends a stream: the finish
// chunk, usage, [DONE]; the events a Responses stream renders of one event
// of the run) each flushed on their own cost a system call each, on every
// stream (issue 22). Before the first write, which sends the headers, b is
// written as write does.
func (g *streamGuard) hold(b []byte) {
	if !g.started || g.failed {
		g.write(b)
		return
	}
	g.refreshDeadline()
	if _, err := g.w.Write(b); err != nil {
		g.failed = true
		return
	}
	g.held = true
}

// flush sends what hold has kept, if anything.
func (g *streamGuard) flush() {
	if !g.held || g.failed {
		return
	}
	g.held = false
	if err := http.NewResponseController(g.w).Flush(); err != nil {
		g.failed = true
	}
}

// send writes b and flushes it.
func (g *streamGuard) send(b []byte) {
	g.refreshDeadline()
	_, err := g.w.Write(b)
	if err == nil {
		err = http.NewResponseController(g.w).Flush()
	}
	g.held = false
	if err != nil {
		g.failed = true // net/http has cancelled the run's context
	}
}

// ginWriter is the type of gin's own response writer, as gin.Context.Writer
// is made: it counts what is written and passes the rest on. A writer some
// middleware put in its place is kept (unwrap). (The context is made on an
// engine of its own, not gin.New's: that one logs a warning in gin's debug
// mode, before the server has set the mode, on the first line of the
// gateway's output.)
var ginWriter = reflect.TypeOf(gin.CreateTestContextOnly(nil, &gin.Engine{}).Writer)

// unwrap goes on to net/http's writer under gin's, once the headers are
// sent through gin's (write).
func (g *streamGuard) unwrap() {
	if u, ok := g.w.(interface{ Unwrap() http.ResponseWriter }); ok && reflect.TypeOf(g.w) == ginWriter {
		g.w = u.Unwrap()
	}
}

// refreshDeadline gives the write about to be made at least the whole
// timeout: the deadline is set a sixteenth past it and moved forward only
// once that sixteenth has gone by. Setting a connection's deadline moves a
// runtime timer, and a stream that set one for every chunk did so dozens
// of times a second for nothing (issue 22); a blocked write fails after
// between the timeout and seventeen sixteenths of it.
func (g *streamGuard) refreshDeadline() {
	now := time.Now()
	if g.deadline.Sub(now) >= g.timeout {
		return
	}
	g.deadline = now.Add(g.timeout + g.timeout/16)
	_ = http.NewResponseController(g.w).SetWriteDeadline(g.deadline)
}

// close lifts the write deadline, which would otherwise stay on a kept-alive
// connection and fail its next answer.
func (g *streamGuard) close() {
	if !g.failed {
		_ = http.NewResponseController(g.w).SetWriteDeadline(time.Time{})
	}
}
