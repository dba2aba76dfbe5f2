package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/runtime"
)

// This file is POST /mcp: Switchboard as an MCP server (streamable HTTP,
// with the official Go SDK). Each graph is one tool named after it; a call
// runs the graph on its message, in a session when it names one, and its
// result is the reply's text with {agentName, sessionId} as structured
// content (and what a paused or stopped run's reply metadata adds). The route takes the same API keys as /v1.

// mcpInput is a graph tool's input.
type mcpInput struct {
	Message   string `json:"message" jsonschema:"the user's message to the graph; empty to resume a session's run paused for approvals, once they are decided"`
	SessionID string `json:"session_id,omitempty" jsonschema:"continues this session (1 to 128 of A-Z a-z 0-9 . _ : -); without one the run is stateless"`
}

// mcpOutput is a graph tool's structured content. A run paused for
// approvals adds what a chat reply's metadata says of it (CONTRACT §6):
// its text is the "Approval required" lines, the decisions go to
// POST /v1/sessions/{id}/approvals/{approvalId}, and a call with an empty
// message in the session resumes it. A run a guardrail stopped adds its
// finish_reason as event and the chat reply's metadata.guardrail (§7), so
// that its text, the guardrail's message, is not taken for an answer.
type mcpOutput struct {
	AgentName string        `json:"agentName" jsonschema:"the agent that answered"`
	SessionID string        `json:"sessionId" jsonschema:"the session, empty for a stateless run"`
	Event     string        `json:"event,omitempty" jsonschema:"approval_required when the run paused for approvals; content_filter when a guardrail stopped it"`
	Approvals []mcpApproval `json:"approvals,omitempty" jsonschema:"the approvals the paused run waits for"`
	Guardrail *mcpGuardrail `json:"guardrail,omitempty" jsonschema:"the guardrail that stopped the run (event content_filter)"`
}

// mcpGuardrail is a chat reply's metadata.guardrail: the guardrail that
// tripped, at which stage, and why.
type mcpGuardrail struct {
	Name   string `json:"name" jsonschema:"the guardrail's name in the config"`
	Stage  string `json:"stage" jsonschema:"input or output"`
	Reason string `json:"reason" jsonschema:"why it tripped, as its judge said; may be empty"`
}

// mcpHalt fills out from a run an interceptor halted: its finish_reason
// as event, and the guardrail its metadata names, read from the same JSON
// a chat reply's metadata carries.
func mcpHalt(h *runtime.Halt, out *mcpOutput) {
	out.Event = h.FinishReason
	var md struct {
		Guardrail *mcpGuardrail `json:"guardrail"`
	}
	if js, err := json.Marshal(h.Metadata); err == nil {
		_ = json.Unmarshal(js, &md)
	}
	out.Guardrail = md.Guardrail
}

// mcpApproval is an approval as structured content: the schema the SDK
// derives (and checks each result against) must read its arguments as the
// JSON object they are, where runtime.Approval holds them as raw bytes.
type mcpApproval struct {
	ID         string         `json:"id"`
	Tool       string         `json:"tool"`
	Arguments  map[string]any `json:"arguments"`
	Agent      string         `json:"agent"`
	ToolCallID string         `json:"toolCallId"`
	Status     string         `json:"status"`
	ExpiresAt  int64          `json:"expiresAt"`
}

// mcpApprovals converts the approvals a paused run waits for.
func mcpApprovals(aps []runtime.Approval) []mcpApproval {
	out := make([]mcpApproval, len(aps))
	for i, a := range aps {
		out[i] = mcpApproval{ID: a.ID, Tool: a.Tool, Agent: a.Agent, ToolCallID: a.ToolCallID, Status: a.Status, ExpiresAt: a.ExpiresAt}
		// Arguments are always a JSON object (CONTRACT §6).
		_ = json.Unmarshal(a.Arguments, &out[i].Arguments)
	}
	return out
}

// mcpCallerKey carries the /mcp request's gin context (its principal, and
// where its run's tokens are charged) to the tool handlers, which see the
// request's context.
type mcpCallerKey struct{}

// newMCPHandler builds the /mcp handler: a stateless streamable HTTP server
// (no MCP session to keep, so any gateway behind a load balancer can answer
// any request) whose tools are the graphs.
func (s *Server) newMCPHandler() http.Handler {
	server := mcp.NewServer(&mcp.Implementation{Name: "switchboard", Title: "Switchboard"}, &mcp.ServerOptions{
		Logger: s.log,
		// The server is stateless: no stream stays open to carry a
		// notifications/tools/list_changed, so none is promised. A client
		// that lists the tools again after a reload sees the new graphs.
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
	})
	tools := s.graphTools()
	for _, tool := range slices.Sorted(maps.Keys(tools)) {
		g := tools[tool]
		desc := g.Description
		if desc == "" {
			desc = "Runs the " + g.Name + " graph"
		}
		t := &mcp.Tool{Name: tool, Description: desc}
		if tool != g.Name {
			t.Title = g.Name
		}
		mcp.AddTool(server, t,
			func(ctx context.Context, _ *mcp.CallToolRequest, in mcpInput) (*mcp.CallToolResult, mcpOutput, error) {
				return s.runGraphTool(ctx, g, in)
			})
	}
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{
		Stateless: true,
		Logger:    s.log,
		// The SDK refuses a loopback request whose Host is another name,
		// against DNS rebinding. With API keys a rebinding page has no key
		// and gets nothing, while the check would refuse a reverse proxy on
		// the same host: it stays on only without keys.
		DisableLocalhostProtection: len(s.cfg.Server.APIKeys) > 0,
		MaxRequestBodyBytes:        s.cfg.Server.MaxBodyBytes,
	})
}

// graphTools maps each published tool name to its graph. A graph whose
// name is a valid tool name is published under it; then, in name order,
// each other graph under mcpToolName, unless a graph already holds that
// name: a renamed graph must not hide the graph that is really called so,
// nor an earlier renamed one. A graph left out is logged.
func (s *Server) graphTools() map[string]*graphs.Graph {
	out := map[string]*graphs.Graph{}
	var renamed []*graphs.Graph
	for _, name := range s.cfg.GraphNames {
		g := s.cfg.Graphs[name]
		if mcpToolName(name) == name {
			out[name] = g
		} else {
			renamed = append(renamed, g)
		}
	}
	for _, g := range renamed {
		tool := mcpToolName(g.Name)
		if other, ok := out[tool]; ok {
			s.log.Warn("mcp: graph not published as a tool: its tool name is another graph's", "graph", g.Name, "tool", tool, "other", other.Name)
			continue
		}
		out[tool] = g
	}
	return out
}

// crossOrigin refuses a browser's request from another origin (its Origin
// or Sec-Fetch-Site says so): net/http's CSRF protection.
var crossOrigin = http.NewCrossOriginProtection()

// mcpToolName is the MCP tool name of a graph: its name, with each
// character MCP does not allow in a tool name (A-Z a-z 0-9 _ - .) replaced
// by _, and cut at MCP's 128 characters; a graph so renamed keeps its name
// as the tool's title.
func mcpToolName(graph string) string {
	b := []byte(graph)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			b[i] = '_'
		}
	}
	return string(b[:min(len(b), 128)])
}

// serveMCP hands the request, with its caller, to the MCP handler, which
// serves it before it returns (the server is stateless). Before it, two
// checks the SDK would answer in plain text are answered in the gateway's
// error shape (CONTRACT §3): without API keys, a request from another
// origin is 403 (the MCP transport: servers must validate Origin, against a
// web page driving a local server; with keys such a page has no key, and a
// reverse proxy may well rewrite the Host, as for the SDK's Host check);
// and a body over max_body_bytes is 413 request_too_large.
func (s *Server) serveMCP(c *gin.Context) {
	if len(s.cfg.Server.APIKeys) == 0 {
		if err := crossOrigin.Check(c.Request); err != nil {
			s.abort(c, &Error{Status: http.StatusForbidden, Code: codeCrossOrigin,
				Message: "a request from another origin (Origin: " + c.GetHeader("Origin") + ") may not call /mcp"})
			return
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, s.cfg.Server.MaxBodyBytes))
	if err != nil {
		s.abort(c, decodeError(err))
		return
	}
	c.Request.Body = io.NopCloser(bytes.NewReader(body))
	ctx := context.WithValue(c.Request.Context(), mcpCallerKey{}, c)
	w := &mcpErrors{ResponseWriter: c.Writer}
	s.mcp.ServeHTTP(w, c.Request.WithContext(ctx))
	if w.status != 0 {
		h := c.Writer.Header()
		h.Del("Content-Type") // gin keeps a Content-Type already set
		h.Del("X-Content-Type-Options")
		s.abort(c, &Error{Status: w.status, Code: mcpErrorCode(w.status), Message: strings.TrimSpace(w.text.String())})
	}
}

// mcpErrorCode is the code of an error the MCP handler answered with
// status: a 403 is its check of the Host (DNS rebinding) or of the origin.
func mcpErrorCode(status int) string {
	switch {
	case status == http.StatusForbidden:
		return codeCrossOrigin
	case status == http.StatusRequestEntityTooLarge:
		return codeTooLarge
	case status >= http.StatusInternalServerError:
		return codeInternal
	}
	return codeInvalidRequest
}

// mcpErrors is the writer the MCP handler answers through. The SDK answers
// a request it cannot serve (a body that is no JSON-RPC message, a method
// it does not handle, an Accept or Content-Type it does not take) in plain
// text (http.Error); mcpErrors keeps such an answer's status and text, and
// serveMCP answers them in the gateway's error shape, as every other error
// of /mcp and /v1 is (CONTRACT §3). Anything else passes through as the
// SDK writes it, flushes included.
type mcpErrors struct {
	http.ResponseWriter
	status int // a plain-text error's status; 0 until one is written
	text   strings.Builder
}

// maxMCPErrorText bounds the text kept of a plain-text error.
const maxMCPErrorText = 1 << 10

func (w *mcpErrors) WriteHeader(code int) {
	if code >= http.StatusBadRequest && strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
		w.status = code
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *mcpErrors) Write(b []byte) (int, error) {
	if w.status == 0 {
		return w.ResponseWriter.Write(b)
	}
	w.text.Write(b[:min(len(b), max(0, maxMCPErrorText-w.text.Len()))])
	return len(b), nil
}

// Flush passes a stream's flush through; a kept error has nothing to flush.
func (w *mcpErrors) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok && w.status == 0 {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection (deadlines).
func (w *mcpErrors) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// runGraphTool runs graph g for one tool call, through serveRun as every
// route runs a graph. A run that fails is a tool error (isError) whose text
// is the code and message /v1 would answer.
func (s *Server) runGraphTool(ctx context.Context, g *graphs.Graph, in mcpInput) (*mcp.CallToolResult, mcpOutput, error) {
	start := time.Now()
	c, _ := ctx.Value(mcpCallerKey{}).(*gin.Context)
	if c == nil {
		return nil, mcpOutput{}, errors.New("internal error: no request")
	}
	fail := func(e *Error) (*mcp.CallToolResult, mcpOutput, error) {
		return nil, mcpOutput{}, fmt.Errorf("%s: %s", e.Code, e.Message)
	}
	var bad *Error
	switch {
	case strings.TrimSpace(in.Message) == "" && in.SessionID == "":
		bad = badRequest("message", "message is required (it may be empty only to resume a session's paused run)")
	case in.SessionID != "" && !validSessionID(in.SessionID):
		bad = badRequest("session_id", "invalid session_id: 1 to 128 of A-Z a-z 0-9 . _ : -")
	}
	if bad != nil {
		s.observe(g.Name, bad.Status, bad.Code, start, 0)
		return fail(bad)
	}
	var msgs []runtime.Message
	if strings.TrimSpace(in.Message) != "" {
		msgs = []runtime.Message{{Role: runtime.RoleUser, Content: in.Message}}
	}
	r := &mcpRenderer{}
	s.serveRun(c, &runCall{graph: g, start: start, req: &runtime.Request{
		Graph:     g,
		Messages:  msgs,
		Principal: principal(c),
		SessionID: in.SessionID,
	}}, r)
	if r.err != nil {
		return fail(r.err)
	}
	out := mcpOutput{AgentName: r.res.Agent, SessionID: in.SessionID}
	text := r.res.Message.Content
	if aps := pendingApprovals(r.res); len(aps) > 0 {
		text, out.Event, out.Approvals = runtime.ApprovalText(aps), runtime.SuspendApproval, mcpApprovals(aps)
	}
	if r.res.Halt != nil {
		mcpHalt(r.res.Halt, &out)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, out, nil
}

// mcpRenderer keeps a run's result or failure for the tool call to return:
// the SDK writes the reply.
type mcpRenderer struct {
	res *runtime.Result
	err *Error
}

// events: a tool result needs only the run's result.
func (r *mcpRenderer) events() runtime.Sink { return nil }

func (r *mcpRenderer) result(res *runtime.Result) *Error {
	r.res = res
	return nil
}

// fail keeps the failure, which the tool call returns as a tool error.
func (r *mcpRenderer) fail(e *Error) bool {
	r.err = e
	return true
}
