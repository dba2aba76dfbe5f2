package gateway

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
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
// content. The route takes the same API keys as /v1.

// mcpInput is a graph tool's input.
type mcpInput struct {
	Message   string `json:"message" jsonschema:"the user's message to the graph"`
	SessionID string `json:"session_id,omitempty" jsonschema:"continues this session (1 to 128 of A-Z a-z 0-9 . _ : -); without one the run is stateless"`
}

// mcpOutput is a graph tool's structured content.
type mcpOutput struct {
	AgentName string `json:"agentName" jsonschema:"the agent that answered"`
	SessionID string `json:"sessionId" jsonschema:"the session, empty for a stateless run"`
}

// mcpCallerKey carries what the route knows of the caller to the tool
// handlers, which see the request's context.
type mcpCallerKey struct{}

// mcpCaller is the caller of one /mcp request.
type mcpCaller struct {
	principal string
	// tokens sums the usage of the request's runs, charged to the key's
	// rate limits once the request is over, as for /v1.
	tokens atomic.Int64
}

// newMCPHandler builds the /mcp handler: a stateless streamable HTTP server
// (no MCP session to keep, so any gateway behind a load balancer can answer
// any request) whose tools are the graphs.
func (s *Server) newMCPHandler() http.Handler {
	server := mcp.NewServer(&mcp.Implementation{Name: "switchboard", Title: "Switchboard"}, &mcp.ServerOptions{Logger: s.log})
	for _, name := range s.cfg.GraphNames {
		g := s.cfg.Graphs[name]
		desc := g.Description
		if desc == "" {
			desc = "Runs the " + g.Name + " graph"
		}
		mcp.AddTool(server, &mcp.Tool{Name: g.Name, Description: desc},
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

// serveMCP hands the request, with its principal, to the MCP handler.
func (s *Server) serveMCP(c *gin.Context) {
	caller := &mcpCaller{principal: principal(c)}
	ctx := context.WithValue(c.Request.Context(), mcpCallerKey{}, caller)
	s.mcp.ServeHTTP(c.Writer, c.Request.WithContext(ctx))
	if n := caller.tokens.Load(); n > 0 {
		c.Set(usageKey, n)
	}
}

// runGraphTool runs graph g for one tool call. A run that fails is a tool
// error (isError) whose text is the code and message /v1 would answer.
func (s *Server) runGraphTool(ctx context.Context, g *graphs.Graph, in mcpInput) (*mcp.CallToolResult, mcpOutput, error) {
	start := time.Now()
	fail := func(e *Error) (*mcp.CallToolResult, mcpOutput, error) {
		s.observe(g.Name, e.Status, e.Code, start, 0)
		return nil, mcpOutput{}, fmt.Errorf("%s: %s", e.Code, e.Message)
	}
	if strings.TrimSpace(in.Message) == "" {
		return fail(badRequest("message", "message is required"))
	}
	if in.SessionID != "" && !validSessionID(in.SessionID) {
		return fail(badRequest("session_id", "invalid session_id: 1 to 128 of A-Z a-z 0-9 . _ : -"))
	}
	if m := s.opts.Metrics; m != nil {
		m.Inflight(1)
		defer m.Inflight(-1)
	}
	caller, _ := ctx.Value(mcpCallerKey{}).(*mcpCaller)
	if caller == nil {
		caller = &mcpCaller{}
	}
	res, err := s.opts.Runner.Run(ctx, &runtime.Request{
		Graph:     g,
		Messages:  []runtime.Message{{Role: runtime.RoleUser, Content: in.Message}},
		Principal: caller.principal,
		SessionID: in.SessionID,
	}, nil)
	if err != nil {
		return fail(s.runError(g, err))
	}
	caller.tokens.Add(int64(res.Usage.TotalTokens))
	s.observe(g.Name, http.StatusOK, "", start, res.ExternalTime)
	out := mcpOutput{AgentName: res.Agent, SessionID: in.SessionID}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Message.Content}}}, out, nil
}
