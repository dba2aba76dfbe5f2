package mcptools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/propagation"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/runtime"
)

// Options configure a Manager. Every field is optional.
type Options struct {
	// Logger receives connection events and the problems found in the
	// servers' tool lists; default slog.Default().
	Logger *slog.Logger
	// Propagator, when set, sends the caller's trace context to HTTP
	// servers with every call.
	Propagator propagation.TextMapPropagator
}

// Manager keeps the MCP servers of a config connected and calls their tools.
// Its methods are safe for concurrent use.
type Manager struct {
	log     *slog.Logger
	servers map[string]*server
	agents  []*graphs.Agent // every agent with MCP servers, by name
	// memory maps an agent's name to the names of the memory tools it may
	// be offered, each to the graphs (by name) that offer it: such a tool
	// takes the name from an MCP tool in a run that has the slot.
	memory map[string]map[string][]string

	// offers maps an agent's name to the tools it is offered now; it is
	// replaced, never changed, each time a server's tools are listed.
	offers atomic.Pointer[map[string][]*graphs.Tool]

	mu       sync.Mutex // serializes recompute
	reported map[string]bool

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New prepares a manager for cfg's `mcp_servers:`; Start connects them.
func New(cfg *graphs.Set, opts Options) *Manager {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	m := &Manager{log: log, servers: map[string]*server{}, reported: map[string]bool{}}
	base := newBaseTransport()
	for name, sc := range cfg.MCPServers {
		m.servers[name] = &server{
			cfg:      sc,
			log:      log.With("mcp_server", name, "transport", sc.Transport()),
			http:     base,
			prop:     opts.Propagator,
			onListed: m.recompute,
			kick:     make(chan struct{}, 1),
		}
	}
	seen := map[string]*graphs.Agent{}
	for _, g := range cfg.Graphs {
		// A sub-agent runs in the graph too: an agent reached only as one
		// is offered its servers' tools as well.
		for name, a := range g.RunningAgents() {
			if len(a.MCP) > 0 {
				seen[name] = a
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(seen)) {
		m.agents = append(m.agents, seen[name])
	}
	m.memory = memoryToolsOf(cfg)
	m.offers.Store(&map[string][]*graphs.Tool{})
	return m
}

// Inherit takes, for each server of m configured exactly as in old, the
// tools old last listed: a server that is down when the config is reloaded
// keeps its tools offered, their calls failing with tool_failed until it
// answers again, as it would have without the reload (CONTRACT §11: once
// listed, a server's tools stay offered). A server whose config changed
// starts afresh. Call it before Start; old may be nil.
func (m *Manager) Inherit(old *Manager) {
	if old == nil {
		return
	}
	for name, s := range m.servers {
		o := old.servers[name]
		if o == nil || !reflect.DeepEqual(*o.cfg, *s.cfg) {
			continue
		}
		if tools := o.listed(); tools != nil {
			s.mu.Lock()
			if s.tools == nil {
				s.tools = tools
			}
			s.mu.Unlock()
		}
	}
	m.recompute()
}

// Start connects every server in the background, and returns once each has
// answered or failed its first attempt (each bounded by its timeout), or
// ctx is done. A server that failed keeps being retried until Close.
func (m *Manager) Start(ctx context.Context) {
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m.cancel = cancel
	var first sync.WaitGroup
	for _, s := range m.servers {
		first.Add(1)
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			s.run(runCtx, first.Done)
		}()
	}
	done := make(chan struct{})
	go func() {
		first.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// Close disconnects every server and stops every stdio server's process,
// returning once they are gone.
func (m *Manager) Close() {
	if m.cancel != nil {
		m.cancel()
	}
	m.wg.Wait()
}

var (
	_ runtime.ToolSource = (*Manager)(nil)
	_ runtime.ToolRunner = (*Manager)(nil)
)

// Tools returns the MCP tools the agent is offered now (tools of kind
// graphs.ToolMCP): those of its servers that have answered at least once,
// minus any whose name is not a valid tool name or is taken by another of
// its tools or handoffs. One whose name is a memory tool's is listed (the
// run offers the memory tool in its place where it applies). The slice is shared: callers must not change it.
func (m *Manager) Tools(agent *graphs.Agent) []*graphs.Tool {
	return m.offeredTo(agent.Name)
}

func (m *Manager) offeredTo(agent string) []*graphs.Tool {
	return (*m.offers.Load())[agent]
}

// Run runs a call of an MCP tool for the run loop (a runtime.ToolKinds
// entry for graphs.ToolMCP).
func (m *Manager) Run(ctx context.Context, call *runtime.ToolInvocation) (string, error) {
	t := call.Tool.MCP
	if t == nil || t.Server == nil {
		return "", fmt.Errorf("tool %q is not an MCP tool", call.Tool.Name)
	}
	return m.Call(ctx, t.Server.Name, t.Tool, call.Call.Function.Arguments)
}

// Call calls a server's tool with the model's JSON arguments and returns
// the result's text. Every error stands for a failed call (tool_failed),
// except the caller's own ctx.Err(), returned as is. Its text is meant for
// the model: the server's text for a tool error, and never an address.
func (m *Manager) Call(ctx context.Context, serverName, tool, arguments string) (string, error) {
	s, ok := m.servers[serverName]
	if !ok {
		return "", fmt.Errorf("no mcp server %q", serverName)
	}
	args := json.RawMessage(arguments)
	if strings.TrimSpace(arguments) == "" {
		args = json.RawMessage("{}")
	} else if !json.Valid(args) {
		return "", errors.New("the arguments are not valid JSON")
	}
	c := s.current()
	if c == nil {
		s.wake()
		return "", fmt.Errorf("mcp server %q is unavailable; the gateway is reconnecting to it", serverName)
	}
	callCtx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	stop := context.AfterFunc(c.calls, cancel)
	defer stop()
	res, err := c.session.CallTool(callCtx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err == nil {
		return resultText(res)
	}
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	s.log.Warn("mcp tool call failed", "tool", tool, "err", err)
	var wire *jsonrpc.Error
	switch {
	case c.calls.Err() != nil && !c.isLost():
		return "", fmt.Errorf("mcp server %q: the connection was closed during the call", serverName)
	case c.isLost():
		return "", fmt.Errorf("mcp server %q: the connection was lost during the call", serverName)
	case errors.Is(callCtx.Err(), context.DeadlineExceeded):
		go s.check(c)
		return "", fmt.Errorf("mcp server %q did not answer within %s", serverName, s.cfg.Timeout)
	case errors.Is(err, mcp.ErrConnectionClosed), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		c.breakOff("the connection closed during a call")
		return "", fmt.Errorf("mcp server %q: the connection was lost during the call", serverName)
	case errors.As(err, &wire):
		// The server refused the call (unknown tool, bad arguments), or
		// an HTTP server no longer knows the session: a ping tells which.
		go s.check(c)
		return "", fmt.Errorf("mcp server %q: %s", serverName, wire.Message)
	default:
		// The transport failed; the detail (an address, a syscall) is
		// logged, not told to the model.
		if !s.check(c) {
			return "", fmt.Errorf("mcp server %q: the connection was lost during the call", serverName)
		}
		return "", fmt.Errorf("mcp server %q: the call failed", serverName)
	}
}

// recompute rebuilds every agent's offered tools from the servers' latest
// listings, logging each problem once.
func (m *Manager) recompute() {
	m.mu.Lock()
	defer m.mu.Unlock()
	offers := make(map[string][]*graphs.Tool, len(m.agents))
	for _, a := range m.agents {
		own := map[string]bool{}
		for _, n := range a.OwnToolNames() {
			own[n] = true
		}
		taken := map[string]string{} // tool name -> its server
		var list []*graphs.Tool
		for _, sc := range a.MCP {
			for _, t := range m.servers[sc.Name].listed() {
				where := fmt.Sprintf("agent %q: mcp server %q: tool %q", a.Name, sc.Name, t.Name)
				switch other, dup := taken[t.Name]; {
				case !graphs.ValidToolName(t.Name):
					m.report(where + " is not a valid tool name (^[a-zA-Z0-9_-]{1,64}$); it is not offered")
				case own[t.Name]:
					m.report(where + " clashes with a tool or handoff of the agent; it is not offered")
				case dup:
					m.report(fmt.Sprintf("%s is also offered by mcp server %q; only that one is offered", where, other))
				default:
					// The run offers the memory tool in its place where
					// the graph's slot applies (runtime's agentTools).
					for _, g := range m.memory[a.Name][t.Name] {
						m.report(fmt.Sprintf("%s clashes with a memory tool of graph %q; the memory tool is offered in its place", where, g))
					}
					taken[t.Name] = sc.Name
					list = append(list, offered(sc, t))
				}
			}
		}
		offers[a.Name] = list
	}
	m.offers.Store(&offers)
}

// memoryToolsOf maps each agent with MCP servers to the memory tools the
// graphs it can run in (sub-agents included) may offer it, each to those
// graphs, sorted.
func memoryToolsOf(cfg *graphs.Set) map[string]map[string][]string {
	out := map[string]map[string][]string{}
	for _, gn := range cfg.GraphNames {
		g := cfg.Graphs[gn]
		if len(g.MemoryTools) == 0 {
			continue
		}
		for name, a := range g.RunningAgents() {
			if len(a.MCP) == 0 {
				continue
			}
			if out[name] == nil {
				out[name] = map[string][]string{}
			}
			for _, t := range g.MemoryTools {
				out[name][t.Name] = append(out[name][t.Name], gn)
			}
		}
	}
	return out
}

// report logs a problem of a server's tool list once, in the words of a
// config error: it is one, found late.
func (m *Manager) report(problem string) {
	if m.reported[problem] {
		return
	}
	m.reported[problem] = true
	m.log.Error("config invalid: " + problem)
}

// emptyObjectSchema is the parameters of a tool that declares no input.
var emptyObjectSchema = json.RawMessage(`{"type":"object","properties":{}}`)

// offered is t as an agent's tool.
func offered(server *graphs.MCPServer, t *mcp.Tool) *graphs.Tool {
	out := &graphs.Tool{
		Name:        t.Name,
		Description: t.Description,
		Parameters:  emptyObjectSchema,
		Kind:        graphs.ToolMCP,
		MCP:         &graphs.MCPTool{Server: server, Tool: t.Name},
	}
	if out.Description == "" {
		out.Description = t.Title
	}
	if t.InputSchema != nil {
		if js, err := json.Marshal(t.InputSchema); err == nil && string(js) != "null" {
			out.Parameters = js
		}
	}
	return out
}
