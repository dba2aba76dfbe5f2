package gateway

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/runtime"
)

// chunk is one chat.completion.chunk event.
type chunk struct {
	ID       string         `json:"id"`
	Object   string         `json:"object"`
	Created  int64          `json:"created"`
	Model    string         `json:"model"`
	Choices  []chunkChoice  `json:"choices"`
	Usage    *runtime.Usage `json:"usage,omitempty"`
	Metadata chunkMetadata  `json:"metadata"`
}

type chunkChoice struct {
	Index        int        `json:"index"`
	Delta        chunkDelta `json:"delta"`
	FinishReason *string    `json:"finish_reason"`
}

type chunkDelta struct {
	Role      string           `json:"role,omitempty"`
	Content   *string          `json:"content,omitempty"`
	ToolCalls []streamToolCall `json:"tool_calls,omitempty"`
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
}

// sse writes a run as Server-Sent Events. Headers leave with the first
// chunk, so a run that fails before it says anything still gets a proper
// HTTP error status.
type sse struct {
	c        *gin.Context
	id       string
	created  int64
	model    string
	agent    string
	started  bool
	sentRole bool
}

// stream runs a graph and renders its events as chunks.
func (s *Server) stream(c *gin.Context, g *graphs.Graph, rreq *runtime.Request, includeUsage bool, start time.Time) {
	w := &sse{c: c, id: completionID(), created: time.Now().Unix(), model: g.Name}
	emit := func(ev runtime.Event) {
		switch ev.Kind {
		case runtime.EventAgentStart:
			if !w.started && w.agent == "" {
				c.Header("X-Agent-Name", ev.Agent)
			}
			w.agent = ev.Agent
		case runtime.EventDelta:
			text := ev.Text
			d := chunkDelta{Content: &text}
			if !w.sentRole {
				d.Role, w.sentRole = "assistant", true
			}
			w.write(d, nil, chunkMetadata{AgentName: ev.Agent}, nil)
		case runtime.EventHandoff:
			w.agent = ev.To
			w.write(chunkDelta{}, nil, chunkMetadata{AgentName: ev.To, Event: "handoff", From: ev.From, To: ev.To, ToolCallID: ev.ToolCallID}, nil)
		}
	}
	if rreq.SessionID != "" {
		c.Header(s.cfg.Server.SessionHeader, rreq.SessionID)
	}
	res, err := s.opts.Runner.Run(c.Request.Context(), rreq, emit)
	if err != nil {
		e := s.runError(g, err)
		if !w.started {
			s.abortRequest(c, g.Name, start, e)
			return
		}
		if e.Status != statusClientClosed {
			w.event(e.body())
			w.done()
		}
		s.observe(g.Name, e.Status, e.Code, start, 0)
		return
	}
	meta := chunkMetadata{AgentName: res.Agent, SessionID: rreq.SessionID}
	d := chunkDelta{}
	if !w.sentRole {
		d.Role = "assistant"
	}
	if !w.sentRole && res.Message.Content != "" {
		// Nothing was streamed (the provider sent the text in one piece).
		text := res.Message.Content
		d.Content = &text
	}
	for i, tc := range res.Message.ToolCalls {
		d.ToolCalls = append(d.ToolCalls, streamToolCall{Index: i, ToolCall: tc})
	}
	if d.Role != "" || d.Content != nil || d.ToolCalls != nil {
		w.write(d, nil, meta, nil)
	}
	reason := res.FinishReason
	w.write(chunkDelta{}, &reason, meta, nil)
	if includeUsage {
		u := res.Usage
		w.write(chunkDelta{}, nil, meta, &u)
	}
	w.done()
	s.observe(g.Name, http.StatusOK, "", start, res.ExternalTime)
}

// write sends one chunk; a usage chunk has no choices.
func (w *sse) write(d chunkDelta, finish *string, meta chunkMetadata, usage *runtime.Usage) {
	ch := chunk{ID: w.id, Object: "chat.completion.chunk", Created: w.created, Model: w.model, Metadata: meta, Usage: usage}
	if usage == nil {
		ch.Choices = []chunkChoice{{Delta: d, FinishReason: finish}}
	} else {
		ch.Choices = []chunkChoice{}
	}
	w.event(ch)
}

// event writes one `data:` event and flushes it.
func (w *sse) event(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	w.begin()
	buf := make([]byte, 0, len(b)+8)
	buf = append(append(append(buf, "data: "...), b...), "\n\n"...)
	_, _ = w.c.Writer.Write(buf)
	w.c.Writer.Flush()
}

// done ends the stream.
func (w *sse) done() {
	w.begin()
	_, _ = w.c.Writer.Write([]byte("data: [DONE]\n\n"))
	w.c.Writer.Flush()
}

// begin sends the stream's headers once.
func (w *sse) begin() {
	if w.started {
		return
	}
	w.started = true
	h := w.c.Writer.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.c.Writer.WriteHeader(http.StatusOK)
}
