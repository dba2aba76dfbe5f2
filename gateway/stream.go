package gateway

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/internal/jsonenc"
	"github.com/switchboard-ai/switchboard/runtime"
)

// A stream's chunks are chat.completion.chunk events:
//
//	{"id":..,"object":"chat.completion.chunk","created":..,"model":..,
//	 "choices":[{"index":0,"delta":{..},"logprobs":null,"finish_reason":..}],"usage":{..},"metadata":{..}}
//
// sse.write encodes them by appending to a buffer the stream reuses, in the
// field order and escaping of encoding/json (stream_internal_test.go checks
// it against json.Marshal): a streamed answer is many small chunks, and
// reflection and a fresh buffer per delta showed in the time to first token.

// chunkDelta is a chunk's delta but for its tool calls: its role is
// omitted when empty, its content when nil. The tool calls are passed
// beside it: they go through encoding/json, which would otherwise move
// every delta's text to the heap (its pointer would leak with them).
type chunkDelta struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
}

// streamToolCall is a tool call as a stream delta carries it.
type streamToolCall struct {
	Index int `json:"index"`
	runtime.ToolCall
}

// chunkMetadata names the agent speaking; a handoff chunk also says who
// handed off to whom.
type chunkMetadata struct {
	AgentName  string `json:"agentName"`
	SessionID  string `json:"sessionId,omitempty"`
	Event      string `json:"event,omitempty"`
	From       string `json:"from,omitempty"`
	To         string `json:"to,omitempty"`
	ToolCallID string `json:"toolCallId,omitempty"`
	Subagent   string `json:"subagent,omitempty"`
	Text       string `json:"text,omitempty"`
	// halt holds the members a halted run adds (haltMembers).
	halt []byte
	// Approvals are the approvals a paused run waits for.
	Approvals []runtime.Approval `json:"approvals,omitempty"`
}

// subagentEvent names a sub-agent event in a chunk's metadata.event.
func subagentEvent(k runtime.EventKind) string {
	switch k {
	case runtime.EventSubagentStart:
		return "subagent_start"
	case runtime.EventSubagentDelta:
		return "subagent_delta"
	}
	return "subagent_done"
}

// sse writes a run as Server-Sent Events. Headers leave with the first
// chunk, so a run that fails before it says anything still gets a proper
// HTTP error status.
type sse struct {
	// What every text chunk reads comes first, with the write guard's
	// fields after it: two cache lines, where it was three and two more
	// objects (the id's string and the gin.Context), since a stream that
	// waited for its next chunk finds each line gone cold (issue 22).
	//
	// idJSON is the stream's id as JSON, quotes included, which every
	// chunk starts with.
	idJSON   streamID
	started  bool
	sentRole bool
	// ending: the stream's last chunks are being written; each is held
	// until [DONE], and they leave together (streamGuard.hold).
	ending bool
	// batch: the chunk being written is of a batched delta, held until
	// the run's next EventFlush.
	batch        bool
	includeUsage bool
	created      int64
	model        string
	// stream: every write goes through it. A value, not an object of its
	// own: every chunk goes through both (issue 22).
	stream streamGuard

	agent     string
	c         *gin.Context
	sessionID string
	// params are the run's sampling parameters (decodeChat).
	params runtime.Params
}

// newSSE returns the renderer of a streamed chat completion.
func (s *Server) newSSE(c *gin.Context, g *graphs.Graph, sessionID string, includeUsage bool) *sse {
	if sessionID != "" {
		c.Header(s.cfg.Server.SessionHeader, sessionID)
	}
	return &sse{c: c, stream: s.guardStream(c), idJSON: newStreamID(), created: time.Now().Unix(), model: g.Name, sessionID: sessionID, includeUsage: includeUsage}
}

// guard returns the stream's write guard.
func (w *sse) guard() *streamGuard { return &w.stream }

// events returns the renderer itself: a method value would be an object
// of its own, which each delta went through, gone cold while the stream
// waited (issue 22).
func (w *sse) events() runtime.Sink { return w }

// Emit renders one event of the run as it happens: text deltas and
// handoffs are chunks; the first agent is named in the headers.
//
// A stream's chunks are written from under the run loop and the provider
// call, 6 KB deep; what Emit and write add stays under 1 KB, so that the
// stream's goroutine keeps an 8 KB stack (issue 22): each kind of chunk is
// built in a frame of its own, and write takes its parts by pointer.
func (w *sse) Emit(ev runtime.Event) {
	switch ev.Kind {
	case runtime.EventAgentStart:
		if !w.started && w.agent == "" {
			w.c.Header("X-Agent-Name", ev.Agent)
		}
		w.agent = ev.Agent
	case runtime.EventDelta:
		// A batched delta leaves with the ones after it, at the next
		// EventFlush (runtime.StreamPauser).
		w.batch = ev.Batched
		w.delta(ev.Agent, ev.Text)
		w.batch = false
	case runtime.EventFlush:
		w.stream.flush()
	case runtime.EventHandoff:
		w.handoff(&ev)
	case runtime.EventSubagentStart, runtime.EventSubagentDelta, runtime.EventSubagentDone:
		w.subagent(&ev)
	}
}

// delta writes a chunk of the answer's text.
func (w *sse) delta(agent, text string) {
	d := chunkDelta{Content: &text}
	if !w.sentRole {
		d.Role, w.sentRole = "assistant", true
	}
	w.write(&d, nil, nil, &chunkMetadata{AgentName: agent}, nil)
}

// handoff writes the chunk of a handoff.
func (w *sse) handoff(ev *runtime.Event) {
	w.agent = ev.To
	w.write(&chunkDelta{}, nil, nil, &chunkMetadata{AgentName: ev.To, Event: "handoff", From: ev.From, To: ev.To, ToolCallID: ev.ToolCallID}, nil)
}

// subagent writes the chunk of a sub-agent's event. A sub-agent's work is
// not the answer: never delta.content.
func (w *sse) subagent(ev *runtime.Event) {
	w.write(&chunkDelta{}, nil, nil, &chunkMetadata{AgentName: ev.Agent, Event: subagentEvent(ev.Kind),
		Subagent: ev.Subagent, ToolCallID: ev.ToolCallID, Text: ev.Text}, nil)
}

// result ends the stream: what was not streamed (text the provider sent in
// one piece, client tool calls), the finish chunk, the usage chunk when
// asked for, and [DONE].
func (w *sse) result(res *runtime.Result) *Error {
	w.ending = true
	meta := chunkMetadata{AgentName: res.Agent, SessionID: w.sessionID, halt: haltMembers(res.Halt)}
	if aps := pendingApprovals(res); aps != nil {
		if res.FinishReason != "tool_calls" {
			// The approval text is one chunk of its own, with the
			// approvals; the finish chunk follows.
			text := runtime.ApprovalText(aps)
			d := chunkDelta{Content: &text}
			if !w.sentRole {
				d.Role, w.sentRole = "assistant", true
			}
			w.write(&d, nil, nil, &chunkMetadata{AgentName: res.Agent, SessionID: w.sessionID, Event: runtime.SuspendApproval, Approvals: aps}, nil)
		} else {
			meta.Approvals = aps
		}
	}
	d := chunkDelta{}
	if !w.sentRole {
		d.Role = "assistant"
	}
	if (!w.sentRole || res.Halt != nil) && res.Message.Content != "" {
		// Nothing was streamed (the provider sent the text in one piece),
		// or an interceptor halted the run with an answer of its own.
		text := res.Message.Content
		d.Content = &text
	}
	var calls []streamToolCall
	for i, tc := range res.Message.ToolCalls {
		calls = append(calls, streamToolCall{Index: i, ToolCall: tc})
	}
	if d.Role != "" || d.Content != nil || calls != nil {
		w.write(&d, calls, nil, &meta, nil)
	}
	reason := res.FinishReason
	w.write(&chunkDelta{}, nil, &reason, &meta, nil)
	if w.includeUsage {
		u := res.Usage
		w.write(&chunkDelta{}, nil, nil, &meta, &u)
	}
	w.done()
	return nil
}

// fail ends a stream that has started with an error event and [DONE];
// before the first chunk it writes nothing, and the failure is an ordinary
// HTTP error.
func (w *sse) fail(e *Error) bool {
	if !w.started {
		return false
	}
	if e.Status != statusClientClosed {
		w.errorEvent(e.body())
		w.done()
	}
	return true
}

// eventBufs hold events while they are built and written. A stream kept
// one of its own from chunk to chunk, a few hundred bytes that every open
// stream held while it waited for the next chunk (issue 22); taken from a
// pool, the buffers are only as many as the chunks being written at once.
var eventBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// maxPooledEvent bounds the buffers kept in eventBufs: a rare large event
// (a long tool call, an error) does not stay held by the pool.
const maxPooledEvent = 16 << 10

// putEventBuf returns an event's buffer, b, to the pool in bp.
func putEventBuf(bp *[]byte, b []byte) {
	if cap(b) <= maxPooledEvent {
		*bp = b[:0]
		eventBufs.Put(bp)
	}
}

// write sends one chunk; a usage chunk has no choices.
func (w *sse) write(d *chunkDelta, calls []streamToolCall, finish *string, meta *chunkMetadata, usage *runtime.Usage) {
	bp := eventBufs.Get().(*[]byte)
	b, err := appendChunk(append((*bp)[:0], "data: "...), w.idJSON[:], w.created, w.model, d, calls, finish, meta, usage)
	if err != nil {
		putEventBuf(bp, *bp)
		return
	}
	b = append(b, "\n\n"...)
	w.send(b)
	putEventBuf(bp, b)
}

// appendChunk appends one chunk's JSON to b; idJSON is its id as JSON.
// Only tool calls, in the last chunk of a run, go through encoding/json.
func appendChunk(b, idJSON []byte, created int64, model string, d *chunkDelta, calls []streamToolCall, finish *string, meta *chunkMetadata, usage *runtime.Usage) ([]byte, error) {
	b = append(b, `{"id":`...)
	b = append(b, idJSON...)
	b = append(b, `,"object":"chat.completion.chunk","created":`...)
	b = strconv.AppendInt(b, created, 10)
	b = append(b, `,"model":`...)
	b = jsonenc.AppendString(b, model)
	if usage != nil {
		b = append(b, `,"choices":[],"usage":{"prompt_tokens":`...)
		b = strconv.AppendInt(b, int64(usage.PromptTokens), 10)
		b = append(b, `,"completion_tokens":`...)
		b = strconv.AppendInt(b, int64(usage.CompletionTokens), 10)
		b = append(b, `,"total_tokens":`...)
		b = strconv.AppendInt(b, int64(usage.TotalTokens), 10)
		if usage.CachedTokens > 0 {
			b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
			b = append(strconv.AppendInt(b, int64(usage.CachedTokens), 10), '}')
		}
		if usage.ReasoningTokens > 0 {
			b = append(b, `,"completion_tokens_details":{"reasoning_tokens":`...)
			b = append(strconv.AppendInt(b, int64(usage.ReasoningTokens), 10), '}')
		}
		b = append(b, '}')
	} else {
		b = append(b, `,"choices":[{"index":0,"delta":{`...)
		sep := ""
		if d.Role != "" {
			b = append(b, `"role":`...)
			b = jsonenc.AppendString(b, d.Role)
			sep = ","
		}
		if d.Content != nil {
			b = append(append(b, sep...), `"content":`...)
			b = jsonenc.AppendString(b, *d.Content)
			sep = ","
		}
		if len(calls) > 0 {
			raw, err := json.Marshal(calls)
			if err != nil {
				return nil, err
			}
			b = append(append(append(b, sep...), `"tool_calls":`...), raw...)
		}
		// logprobs is null, as OpenAI sends it when none were asked for.
		b = append(b, `},"logprobs":null,"finish_reason":`...)
		if finish == nil {
			b = append(b, "null"...)
		} else {
			b = jsonenc.AppendString(b, *finish)
		}
		b = append(b, "}]"...)
	}
	b = append(b, `,"metadata":{"agentName":`...)
	b = jsonenc.AppendString(b, meta.AgentName)
	for _, f := range [...]struct{ key, v string }{
		{`,"sessionId":`, meta.SessionID}, {`,"event":`, meta.Event}, {`,"from":`, meta.From},
		{`,"to":`, meta.To}, {`,"toolCallId":`, meta.ToolCallID},
		{`,"subagent":`, meta.Subagent}, {`,"text":`, meta.Text},
	} {
		if f.v != "" {
			b = jsonenc.AppendString(append(b, f.key...), f.v)
		}
	}
	b = append(b, meta.halt...)
	if meta.Approvals != nil {
		raw, err := json.Marshal(meta.Approvals)
		if err != nil {
			return nil, err
		}
		b = append(append(b, `,"approvals":`...), raw...)
	}
	return append(b, "}}"...), nil
}

// errorEvent writes v as one `data:` event (errors, which are rare, use it).
func (w *sse) errorEvent(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	bp := eventBufs.Get().(*[]byte)
	ev := append(append(append((*bp)[:0], "data: "...), b...), "\n\n"...)
	w.send(ev)
	putEventBuf(bp, ev)
}

// send writes one whole event and flushes it, so that it leaves at once;
// one of the stream's last chunks leaves with [DONE].
func (w *sse) send(event []byte) {
	w.begin()
	if w.ending || w.batch {
		w.stream.hold(event)
		return
	}
	w.stream.write(event)
}

// done ends the stream.
func (w *sse) done() {
	w.begin()
	w.stream.write([]byte("data: [DONE]\n\n"))
}

// begin sends the stream's headers once.
func (w *sse) begin() {
	if w.started {
		return
	}
	w.started = true
	startEventStream(w.c)
}

// startEventStream sets the headers of an event stream (chat completions
// and Responses) and its status, which leave with its first event.
//
// Each value is one slice shared by every stream: net/http only reads a
// response's header values (Header.Add appends to a full slice, so it
// copies), and Header.Set made a slice of each on every stream.
func startEventStream(c *gin.Context) {
	h := c.Writer.Header()
	h["Content-Type"] = eventStreamHeader.contentType
	h["Cache-Control"] = eventStreamHeader.cacheControl
	h["Connection"] = eventStreamHeader.connection
	h["X-Accel-Buffering"] = eventStreamHeader.accelBuffering
	c.Writer.WriteHeader(http.StatusOK)
}

// eventStreamHeader holds the values startEventStream sets, each with
// length and capacity 1. Nothing writes to them.
var eventStreamHeader = struct {
	contentType, cacheControl, connection, accelBuffering []string
}{
	contentType:    []string{"text/event-stream"},
	cacheControl:   []string{"no-cache"},
	connection:     []string{"keep-alive"},
	accelBuffering: []string{"no"},
}
