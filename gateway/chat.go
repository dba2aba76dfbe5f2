package gateway

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/runtime"
)

// completion is a non-streamed reply.
type completion struct {
	ID       string        `json:"id"`
	Object   string        `json:"object"`
	Created  int64         `json:"created"`
	Model    string        `json:"model"`
	Choices  []choice      `json:"choices"`
	Usage    replyUsage    `json:"usage"`
	Metadata replyMetadata `json:"metadata"`
}

// replyUsage is a reply's usage as OpenAI's: the counts, and the
// providers' details when they gave some.
type replyUsage struct {
	PromptTokens            int                `json:"prompt_tokens"`
	CompletionTokens        int                `json:"completion_tokens"`
	TotalTokens             int                `json:"total_tokens"`
	PromptTokensDetails     *promptDetails     `json:"prompt_tokens_details,omitempty"`
	CompletionTokensDetails *completionDetails `json:"completion_tokens_details,omitempty"`
}

type promptDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

type completionDetails struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}

// newReplyUsage renders u.
func newReplyUsage(u runtime.Usage) replyUsage {
	out := replyUsage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
	if u.CachedTokens > 0 {
		out.PromptTokensDetails = &promptDetails{CachedTokens: u.CachedTokens}
	}
	if u.ReasoningTokens > 0 {
		out.CompletionTokensDetails = &completionDetails{ReasoningTokens: u.ReasoningTokens}
	}
	return out
}

type choice struct {
	Index        int          `json:"index"`
	Message      replyMessage `json:"message"`
	FinishReason string       `json:"finish_reason"`
	// Logprobs is always null: the gateway asks providers for none.
	Logprobs *struct{} `json:"logprobs"`
}

// replyMessage is the assistant message of a reply in OpenAI's response
// shape, which requires content and refusal even when they are null.
type replyMessage struct {
	Role string `json:"role"`
	// Content is null for a message that only calls tools.
	Content   *string            `json:"content"`
	Refusal   *string            `json:"refusal"`
	ToolCalls []runtime.ToolCall `json:"tool_calls,omitempty"`
}

// newReplyMessage renders the run's final message.
func newReplyMessage(m runtime.Message) replyMessage {
	out := replyMessage{Role: runtime.RoleAssistant, ToolCalls: m.ToolCalls}
	if m.Content != "" || len(m.ToolCalls) == 0 {
		text := m.Content
		out.Content = &text
	}
	return out
}

// replyMetadata names the agent that answered and the session; a run that
// paused for approvals adds them.
type replyMetadata struct {
	AgentName string             `json:"agentName"`
	SessionID string             `json:"sessionId"`
	Event     string             `json:"event,omitempty"`
	Approvals []runtime.Approval `json:"approvals,omitempty"`
	// halt holds the members a halted run adds (haltMembers).
	halt []byte
}

// chatCompletions runs a graph, or proxies a plain model when passthrough
// is on.
func (s *Server) chatCompletions(c *gin.Context) {
	// Decoding has a large frame and returns before the run: a stream's
	// run stays on this goroutine's stack for as long as it lasts, and
	// every frame below it is held by every open stream (issue 22).
	if call, r := s.decodeChat(c); call != nil {
		s.serveRun(c, call, r)
	}
}

// decodeChat decodes a chat completion request into the run to make and
// its renderer; on bad input it answers the request and returns nil.
func (s *Server) decodeChat(c *gin.Context) (*runCall, renderer) {
	start := time.Now()
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, s.cfg.Server.MaxBodyBytes))
	if err != nil {
		s.abortRequest(c, "", start, decodeError(err))
		return nil, nil
	}
	req, e := decodeChatRequest(body)
	if e != nil {
		if s.proxies != nil && s.passthroughAsIs(c, body) {
			return nil, nil
		}
		s.abortRequest(c, "", start, e)
		return nil, nil
	}
	return s.chatCall(c, start, body, req)
}

// passthroughAsIs proxies a request the graphs' decoding refused when its
// model names a passthrough provider: such a request is the provider's
// to judge, as is (a deprecated role, a tool type no graph takes).
func (s *Server) passthroughAsIs(c *gin.Context, body []byte) bool {
	var m struct {
		Model string `json:"model"`
	}
	if json.Unmarshal(body, &m) != nil {
		return false
	}
	if _, ok := s.cfg.Graphs[m.Model]; ok {
		return false
	}
	return s.passthrough(c, m.Model, body)
}

// chatCall returns the run of a decoded request and its renderer; nil
// when it has answered the request. Its frame is not on the stack while
// the body is decoded, the deepest moment of a request (decodeChatRequest).
//
//go:noinline
func (s *Server) chatCall(c *gin.Context, start time.Time, body []byte, req *chatRequest) (*runCall, renderer) {
	g, ok := s.cfg.Graphs[req.Model]
	if !ok {
		if s.proxies != nil && s.passthrough(c, req.Model, body) {
			return nil, nil
		}
		s.abortRequest(c, "", start, errModelNotFound(req.Model))
		return nil, nil
	}
	sessionID := c.GetHeader(s.cfg.Server.SessionHeader)
	if sessionID != "" && !validSessionID(sessionID) {
		s.abortRequest(c, g.Name, start, badRequest("", "invalid session id in %s: 1 to 128 of A-Z a-z 0-9 . _ : -", s.cfg.Server.SessionHeader))
		return nil, nil
	}
	if len(req.Messages) == 0 && sessionID == "" {
		// Only a paused session's request may bring no message.
		s.abortRequest(c, g.Name, start, badRequest("messages", "messages must hold at least one message"))
		return nil, nil
	}
	rreq := &runtime.Request{
		Approvals:   decisions(req.Approvals),
		Graph:       g,
		Messages:    req.Messages,
		ClientTools: req.clientTools(),
		Metadata:    req.metadata(),
		Principal:   principal(c),
		SessionID:   sessionID,
		Stream:      req.Stream,
		ToolChoice:  req.ToolChoice,
	}
	call := &runCall{graph: g, req: rreq, start: start}
	if req.Stream {
		// A stream's parameters are copied into its renderer, which lives
		// as long as the stream, rather than pointed to in req: a pointer
		// into req would keep the whole decoded body (its wire messages,
		// tools and metadata) for as long as the stream lasts, when the run
		// needs only what rreq holds (issue 22).
		w := s.newSSE(c, g, rreq.SessionID, req.StreamOptions != nil && req.StreamOptions.IncludeUsage)
		w.params = req.Params
		rreq.Params = &w.params
		return call, w
	}
	rreq.Params = &req.Params
	return call, &chatJSON{s: s, c: c, graph: g, sessionID: sessionID}
}

// chatJSON renders a run as one chat.completion object.
type chatJSON struct {
	s         *Server
	c         *gin.Context
	graph     *graphs.Graph
	sessionID string
}

// events: a JSON reply needs only the result.
func (r *chatJSON) events() runtime.Sink { return nil }

func (r *chatJSON) result(res *runtime.Result) *Error {
	r.c.Header("X-Agent-Name", res.Agent)
	if r.sessionID != "" {
		r.c.Header(r.s.cfg.Server.SessionHeader, r.sessionID)
	}
	meta := replyMetadata{AgentName: res.Agent, SessionID: r.sessionID, halt: haltMembers(res.Halt)}
	msg := res.Message
	if aps := pendingApprovals(res); aps != nil {
		meta.Approvals = aps
		if res.FinishReason != "tool_calls" {
			meta.Event, msg.Content = runtime.SuspendApproval, runtime.ApprovalText(aps)
		}
	}
	r.c.JSON(http.StatusOK, completion{
		ID:       completionID(),
		Object:   "chat.completion",
		Created:  time.Now().Unix(),
		Model:    r.graph.Name,
		Choices:  []choice{{Message: newReplyMessage(msg), FinishReason: res.FinishReason}},
		Usage:    newReplyUsage(res.Usage),
		Metadata: meta,
	})
	return nil
}

// fail writes nothing: the failure is answered as an HTTP error, which
// names a session request's session in the session header, as its answer
// would have.
func (r *chatJSON) fail(*Error) bool {
	if r.sessionID != "" {
		r.c.Header(r.s.cfg.Server.SessionHeader, r.sessionID)
	}
	return false
}

// decodeError maps a failure to read the body.
func decodeError(err error) *Error {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return &Error{Status: http.StatusRequestEntityTooLarge, Code: codeTooLarge, Message: fmt.Sprintf("the request body is over the limit of %d bytes", tooBig.Limit)}
	}
	return bodyReadError(err)
}

// runError maps and logs a run's failure.
func (s *Server) runError(g *graphs.Graph, err error) *Error {
	e := fromRunError(err)
	if e.Status >= 500 && e.Status != statusClientClosed {
		s.log.Warn("run failed", "graph", g.Name, "code", e.Code, "err", err)
	}
	return e
}

// abortRequest answers an error and counts the request.
func (s *Server) abortRequest(c *gin.Context, graph string, start time.Time, e *Error) {
	if e.Status != statusClientClosed {
		s.abort(c, e)
	} else {
		c.Abort()
	}
	s.observe(graph, e.Status, e.Code, start, 0)
}

// observe records a request's metrics.
func (s *Server) observe(graph string, status int, code string, start time.Time, external time.Duration) {
	m := s.opts.Metrics
	if m == nil {
		return
	}
	total := time.Since(start)
	m.Request(graph, code, status, total.Seconds())
	if status == http.StatusOK && graph != "" {
		m.Overhead(graph, (total - external).Seconds())
	}
}

// completionIDBytes is how many random bytes a completion id holds.
const completionIDBytes = 12

// completionID returns a fresh "chatcmpl-..." id.
func completionID() string {
	id := newStreamID()
	return string(id[1 : len(id)-1])
}

// streamID is a completion id as JSON, quotes included: a chat stream's
// renderer keeps its id so, in itself, since every chunk starts with it
// and a string of its own was one more object each chunk touched (issue
// 22).
type streamID [len(`"chatcmpl-"`) + 2*completionIDBytes]byte

// newStreamID returns a fresh completion id (completionID) as JSON.
func newStreamID() (id streamID) {
	var b [completionIDBytes]byte
	_, _ = rand.Read(b[:])
	n := copy(id[:], `"chatcmpl-`)
	hex.Encode(id[n:], b[:])
	id[len(id)-1] = '"'
	return id
}
