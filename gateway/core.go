package gateway

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/runtime"
)

// Every route that runs a graph takes the same three steps, whatever its
// protocol:
//
//  1. decode: the protocol's request becomes a runCall (a graph and a
//     runtime.Request); bad input is answered before anything runs.
//  2. run: serveRun, the one place that runs a graph, counts it in flight,
//     charges its tokens to the rate limits, maps its failure to an Error
//     and records its metrics.
//  3. render: a renderer of the protocol writes the run's events as they
//     happen, then its result or its failure.
//
// /v1/chat/completions renders with chatJSON (chat.go) or sse (stream.go),
// /v1/responses with responsesRenderer (responses.go). A new protocol (the
// MCP server's tools/call) is a decoder and a renderer, not a copy of a
// handler.

// renderer writes one run's reply in one protocol.
type renderer interface {
	// events returns what receives the run's events as they happen (on
	// the run's goroutine), or nil when the renderer needs only the result.
	events() runtime.Sink
	// result renders a finished run. An Error it returns (e.g. the reply
	// could not be stored) is answered like a failed run.
	result(res *runtime.Result) *Error
	// fail renders a failed run, and reports whether it did: false when
	// nothing was written yet, and the failure is then answered as an
	// HTTP error in the OpenAI shape.
	fail(e *Error) bool
}

// ErrShutdown is the cause with which the server cancels the runs still
// open when its drain timeout has passed: each answers 503 draining (on a
// stream, an error event and [DONE]) before its connection closes, where
// the client would otherwise see the connection cut mid-stream.
var ErrShutdown = errors.New("the gateway is shutting down")

// runCall is a decoded request to run a graph.
type runCall struct {
	graph *graphs.Graph
	req   *runtime.Request
	start time.Time // when the request arrived
	// run, when set, runs req instead of Runner.Run (the Responses API
	// forks a session first when it must).
	run func(ctx context.Context, req *runtime.Request, sink runtime.Sink) (*runtime.Result, error)
}

// serveRun runs a decoded request and renders it with r.
func (s *Server) serveRun(c *gin.Context, call *runCall, r renderer) {
	if m := s.opts.Metrics; m != nil {
		m.Inflight(1)
		defer m.Inflight(-1)
	}
	ctx, done := runContext(c, r)
	defer done()
	var res *runtime.Result
	var err error
	if call.run != nil {
		res, err = call.run(ctx, call.req, r.events())
	} else {
		res, err = s.opts.Runner.RunTo(ctx, call.req, r.events())
	}
	if err == nil {
		recordUsage(c, res.Usage)
		if e := r.result(res); e != nil {
			err = e
		} else {
			s.observe(call.graph.Name, http.StatusOK, "", call.start, res.ExternalTime)
			return
		}
	}
	if errors.Is(context.Cause(ctx), ErrShutdown) {
		err = &Error{Status: http.StatusServiceUnavailable, Code: codeDraining,
			Message: "the gateway shut down before the run finished (its drain timeout passed); retry"}
	}
	e := s.runError(call.graph, err)
	if !r.fail(e) {
		s.abortRequest(c, call.graph.Name, call.start, e)
		return
	}
	s.observe(call.graph.Name, e.Status, e.Code, call.start, 0)
}
