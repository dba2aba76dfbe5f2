package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/runtime"
)

// POST /v1/responses runs a graph in the shape of OpenAI's Responses API
// (docs/http-api.md). A stored response is a point of a session:
// previous_response_id continues the session when the response is its
// latest point, and forks a new session from the response otherwise, so
// that the conversation it leads to is never changed by a fork.

// responsesCall is one POST /v1/responses being served.
type responsesCall struct {
	s         *Server
	c         *gin.Context
	g         *graphs.Graph
	req       *responsesRequest
	principal string
	start     time.Time
	// prev is the stored response the request continues, if any.
	prev *responseRecord
	// temporary is a session forked only for this run (store: false with a
	// previous response), deleted when the run ends.
	temporary bool
	// fresh is a new session the gateway named for this run: it starts with
	// all the input's history (see Runner.Seed).
	fresh bool
	// made is whether the run goes on in a session made for it (fresh, or
	// forked from the previous response): a run that fails before the
	// client hears of that session forgets it (forgetMade).
	made bool
	// spent is what a failed run had spent (runtime.RunError), for its
	// response.failed; failedAt is where its session stood after the
	// steps it saved, for the failed response's record.
	spent    runtime.Usage
	failedAt *runtime.Point
}

func (s *Server) createResponse(c *gin.Context) {
	start := time.Now()
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, s.cfg.Server.MaxBodyBytes))
	if err != nil {
		s.abortRequest(c, "", start, decodeError(err))
		return
	}
	req, e := decodeResponsesRequest(body)
	if e != nil {
		s.abortRequest(c, "", start, e)
		return
	}
	g, ok := s.cfg.Graphs[req.Model]
	if !ok {
		s.abortRequest(c, "", start, errModelNotFound(req.Model))
		return
	}
	if s.opts.Responses == nil && req.stored() {
		// Without a place for responses nothing can be stored.
		f := false
		req.Store = &f
	}
	call := &responsesCall{s: s, c: c, g: g, req: req, principal: principal(c), start: start}
	sessionID, e := call.session()
	if e != nil {
		s.abortRequest(c, g.Name, start, e)
		return
	}
	call.run(sessionID)
}

// session picks the session the run goes on in: the previous response's
// (checked against the session header), the header's, a new one for a
// stored response, or none.
func (call *responsesCall) session() (string, *Error) {
	s, c, req := call.s, call.c, call.req
	header := c.GetHeader(s.cfg.Server.SessionHeader)
	if header != "" && !validSessionID(header) {
		return "", badRequest("", "invalid session id in %s: 1 to 128 of A-Z a-z 0-9 . _ : -", s.cfg.Server.SessionHeader)
	}
	if req.PreviousResponseID != nil && *req.PreviousResponseID != "" {
		rec, e := s.loadResponse(c.Request.Context(), call.principal, *req.PreviousResponseID, "previous_response_id")
		if e != nil {
			return "", e
		}
		if header != "" && header != rec.Session {
			return "", badRequest("previous_response_id", "%s names session %q, but response %s belongs to another session",
				s.cfg.Server.SessionHeader, header, *req.PreviousResponseID)
		}
		call.prev = rec
		if !req.stored() {
			// A run that is not stored still needs the history up to the
			// response: it gets a session of its own, forgotten after it.
			call.temporary = true
			return newSessionID(), nil
		}
		return rec.Session, nil
	}
	switch {
	case !req.stored():
		return "", nil
	case header != "":
		return header, nil
	default:
		call.fresh, call.made = true, true
		return newSessionID(), nil
	}
}

// newSessionID names a session that a stored response starts or forks.
func newSessionID() string { return newID("sess_") }

// run runs the graph and renders the response, as JSON or as a stream.
func (call *responsesCall) run(sessionID string) {
	s, c, req, g := call.s, call.c, call.req, call.g
	resp := newResponse(newID("resp_"), g.Name, req)
	r := &responsesRenderer{call: call, resp: resp}
	var send func(string, any)
	if req.Stream {
		r.w = s.newResponsesSSE(c)
		send = r.w.send
	}
	r.rnd = newResponseRender(resp, req.includes(includeHandoffs), send)
	r.rreq = &runtime.Request{
		Graph:       g,
		Messages:    req.messages,
		ClientTools: req.clientTools(),
		Metadata:    req.metadata(),
		Principal:   call.principal,
		SessionID:   sessionID,
		Stream:      req.Stream,
		Params:      req.params(),
		ToolChoice:  req.toolChoice(),
		Approvals:   decisions(req.Approvals),
	}
	if call.prev != nil && !call.temporary {
		at := call.prev.Point
		r.rreq.At = &at
	}
	if call.temporary {
		r.rreq.Ephemeral = true
		defer call.forget(sessionID)
	}
	if sessionID != "" && r.w != nil && !call.temporary {
		c.Header(s.cfg.Server.SessionHeader, sessionID)
	}
	s.serveRun(c, &runCall{graph: g, req: r.rreq, start: call.start, run: call.runInput}, r)
}

// responsesRenderer renders a run as a Responses object, or as the
// Responses stream's events, and stores it when asked to.
type responsesRenderer struct {
	call  *responsesCall
	resp  *responseObject
	rnd   *responseRender
	w     *responsesSSE // nil: a JSON reply
	rreq  *runtime.Request
	first string // the agent that starts the run, named in a stream's headers
	agent string // the agent that holds the run, named by a response.failed
}

func (r *responsesRenderer) events() runtime.Sink { return r }

// Emit renders one event of the run.
func (r *responsesRenderer) Emit(ev runtime.Event) {
	switch ev.Kind {
	case runtime.EventAgentStart:
		r.agent = ev.Agent
	case runtime.EventHandoff:
		r.agent = ev.To
	}
	if ev.Kind == runtime.EventAgentStart && r.first == "" {
		r.first = ev.Agent
		if r.w != nil {
			r.call.c.Header("X-Agent-Name", ev.Agent)
		}
	}
	if r.w == nil {
		r.rnd.onEvent(ev)
		return
	}
	// What the event renders (the first text: the response's and the
	// message's opening events with it) leaves in one write; a batched
	// delta's, with the deltas after it, at the next EventFlush
	// (runtime.StreamPauser).
	r.w.holding = true
	r.rnd.onEvent(ev)
	r.w.holding = false
	if !ev.Batched {
		r.w.stream.flush()
	}
}

func (r *responsesRenderer) result(res *runtime.Result) *Error {
	call, c := r.call, r.call.c
	call.spent = res.Usage // for a response.failed, should the store fail
	if r.w != nil {
		r.w.holding = true // until [DONE]
	}
	r.rnd.finish(res, map[string]string{"agentName": res.Agent, "sessionId": r.sessionID()})
	if call.req.stored() {
		if e := call.store(r.resp, r.rnd.deltas, r.sessionID(), res.Point); e != nil {
			return e
		}
	}
	if r.w != nil {
		r.rnd.complete()
		r.w.done()
		return nil
	}
	c.Header("X-Agent-Name", res.Agent)
	if id := r.sessionID(); id != "" {
		c.Header(call.s.cfg.Server.SessionHeader, id)
	}
	c.JSON(http.StatusOK, r.resp)
	return nil
}

// sessionID is the session the response names: none for a temporary one.
func (r *responsesRenderer) sessionID() string {
	if r.call.temporary {
		return ""
	}
	return r.rreq.SessionID
}

// guard returns the stream's write guard, nil for a JSON reply.
func (r *responsesRenderer) guard() *streamGuard {
	if r.w == nil {
		return nil
	}
	return &r.w.stream
}

// fail answers a failed run: response.failed once the stream started, an
// HTTP error before.
func (r *responsesRenderer) fail(e *Error) bool {
	// The response.failed is shaped like any reply (CONTRACT §10): the
	// steps the run saved are in its session, under the agent that holds
	// it, and its finished model calls count.
	meta := map[string]string{"agentName": r.agent, "sessionId": r.sessionID()}
	if r.w != nil {
		r.w.holding = true // until [DONE]
	}
	if !r.rnd.fail(e, r.call.spent, meta) {
		// The client hears of the error alone: no response names the
		// session, and neither will the reply's headers.
		r.call.forgetMade(r.rreq.SessionID)
		return false
	}
	// The client was given the response's id: it is stored, failed, as
	// OpenAI stores one, before its last events leave, so that it can be
	// retrieved (or its stream replayed) and continued from the steps
	// its run saved.
	if call := r.call; call.req.stored() && !call.temporary && call.failedAt != nil {
		if se := call.store(r.resp, r.rnd.deltas, r.sessionID(), *call.failedAt); se != nil {
			call.s.log.Warn("store a failed response", "response", r.resp.ID, "err", se.Message)
		}
	}
	r.w.done()
	return true
}

// runInput runs rreq (runOrFork), and words a refused tool result as a
// Responses client wrote it: a function_call_output whose call_id answers
// no call of the response it continues, as OpenAI words it.
func (call *responsesCall) runInput(ctx context.Context, rreq *runtime.Request, sink runtime.Sink) (*runtime.Result, error) {
	res, err := call.runOrFork(ctx, rreq, sink)
	if re := (*runtime.RunError)(nil); errors.As(err, &re) {
		call.spent, call.failedAt = re.Usage, re.Point
	}
	var pe *runtime.ParamError
	if errors.As(err, &pe) && pe.Param == "tool_choice" {
		// The run reads tool_choice in the Chat Completions shape
		// (responsesRequest.toolChoice): the shape it shows is this API's.
		return res, badRequest("tool_choice", "%s", strings.ReplaceAll(pe.Msg, `{"type": "function", "function": {"name": ...}}`, `{"type": "function", "name": ...}`))
	}
	if errors.As(err, &pe) && pe.Param == "messages" {
		// Calls of the response left without their function_call_output.
		return res, badRequest("input", "%s", pe.Msg)
	}
	if errors.As(err, &pe) && strings.HasSuffix(pe.Param, ".tool_call_id") {
		var i int
		if _, serr := fmt.Sscanf(pe.Param, "messages[%d]", &i); serr == nil && i < len(rreq.Messages) {
			return res, badRequest("input", "no function call found for the function_call_output with call_id %q", rreq.Messages[i].ToolCallID)
		}
	}
	return res, err
}

// runOrFork runs rreq. When it continues from a point its session has moved
// past, or is moving past (another run holds it), or when it runs on a
// temporary session, the session is first forked from that point into a
// new one, and the run goes on there.
func (call *responsesCall) runOrFork(ctx context.Context, rreq *runtime.Request, sink runtime.Sink) (*runtime.Result, error) {
	if call.fresh {
		if err := call.seed(ctx, rreq.SessionID); err != nil {
			return nil, err
		}
	}
	if !call.temporary {
		res, err := call.s.opts.Runner.RunTo(ctx, rreq, sink)
		// A session another run holds is moving past the point too.
		moved := errors.Is(err, runtime.ErrMoved) || rreq.At != nil && errors.Is(err, runtime.ErrBusy)
		if !moved {
			return res, err
		}
		rreq.At, rreq.SessionID = nil, newSessionID()
		if call.req.Stream {
			call.c.Header(call.s.cfg.Server.SessionHeader, rreq.SessionID)
		}
	}
	src := runtime.SessionKey{Principal: call.principal, ID: call.prev.Session}
	dst := runtime.SessionKey{Principal: call.principal, ID: rreq.SessionID}
	if err := call.s.opts.Runner.Fork(ctx, src, call.prev.Point, dst); err != nil {
		return nil, call.forkError(err)
	}
	call.made = !call.temporary
	return call.s.opts.Runner.RunTo(ctx, rreq, sink)
}

// seed writes the input's history, up to its last assistant message, to a
// new session: a client that sends a whole conversation (a stateless agent
// SDK) keeps it all, where a run in a session takes only the input after
// the last assistant message as new.
func (call *responsesCall) seed(ctx context.Context, sessionID string) error {
	msgs := call.req.messages
	k := 0
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == runtime.RoleAssistant {
			k = i + 1
			break
		}
	}
	if k == 0 {
		return nil
	}
	return call.s.opts.Runner.Seed(ctx, runtime.SessionKey{Principal: call.principal, ID: sessionID}, msgs[:k])
}

// forkError explains a fork that cannot be made.
func (call *responsesCall) forkError(err error) error {
	id := *call.req.PreviousResponseID
	switch {
	case errors.Is(err, runtime.ErrNotFound):
		return &Error{Status: http.StatusNotFound, Code: codeResponseNotFound, Param: "previous_response_id",
			Message: "the conversation of response " + id + " has expired or was deleted"}
	case errors.Is(err, runtime.ErrPointGone):
		return badRequest("previous_response_id", "the conversation of response %s was rewritten after it (an input filter at a handoff): it can no longer be continued from there", id)
	default:
		return err
	}
}

// store keeps the response as a point of its session, before the client
// hears it is complete: the client may continue from it at once.
func (call *responsesCall) store(resp *responseObject, deltas [][]int, sessionID string, at runtime.Point) *Error {
	body, err := json.Marshal(resp)
	if err != nil {
		return fromRunError(fmt.Errorf("encode response: %w", err))
	}
	rec, err := json.Marshal(responseRecord{Session: sessionID, Point: at, Response: body, Input: storedInputItems(call.req.Input), Deltas: deltas})
	if err != nil {
		return fromRunError(fmt.Errorf("encode response record: %w", err))
	}
	if err := call.s.opts.Responses.PutResponse(call.c.Request.Context(), call.principal, resp.ID, rec); err != nil {
		return fromRunError(fmt.Errorf("store response: %w", err)) // serveRun logs it
	}
	return nil
}

// forgetMade forgets the session made for a run that failed before the
// client heard of it (no response stored, no stream started): whether it
// holds the seeded history, a fork's copy or the run's first steps, nobody
// will ever name it (a request refused before it ran, a provider that
// failed). The session header goes from the error reply too.
func (call *responsesCall) forgetMade(sessionID string) {
	if !call.made || sessionID == "" {
		return
	}
	call.made = false
	call.c.Writer.Header().Del(call.s.cfg.Server.SessionHeader)
	call.forget(sessionID)
}

// forget deletes a session made for the call: a temporary one, or one made
// for a run that failed (forgetMade).
func (call *responsesCall) forget(sessionID string) {
	key := runtime.SessionKey{Principal: call.principal, ID: sessionID}
	if err := call.s.opts.Runner.DeleteSession(context.WithoutCancel(call.c.Request.Context()), key); err != nil {
		call.s.log.Warn("delete a session made for a response", "session", sessionID, "err", err)
	}
}

// responsesSSE writes a Responses stream: each event as `event: <type>`
// and `data: <json>`. Headers leave with the first event.
type responsesSSE struct {
	c       *gin.Context
	stream  streamGuard // every write goes through it
	started bool
	// holding: the events being written are made at one moment (those of
	// one event of the run, or those that end the stream) and leave
	// together (streamGuard.hold).
	holding bool
}

// newResponsesSSE returns the writer of a Responses stream.
func (s *Server) newResponsesSSE(c *gin.Context) *responsesSSE {
	return &responsesSSE{c: c, stream: s.guardStream(c)}
}

// done ends the stream with the literal [DONE], after its terminal event,
// as the Open Responses specification asks; OpenAI's clients skip it.
func (w *responsesSSE) done() { w.stream.write([]byte("data: [DONE]\n\n")) }

func (w *responsesSSE) send(typ string, ev any) {
	b, err := json.Marshal(ev)
	if err != nil {
		return
	}
	if !w.started {
		w.started = true
		startEventStream(w.c)
	}
	// The event's buffer comes from the pool the chat stream's do (issue
	// 22): a stream kept its own, as large as its largest event.
	bp := eventBufs.Get().(*[]byte)
	buf := append(append(append(append(append((*bp)[:0], "event: "...), typ...), "\ndata: "...), b...), "\n\n"...)
	if w.holding {
		w.stream.hold(buf)
	} else {
		w.stream.write(buf)
	}
	putEventBuf(bp, buf)
}
