package graphs

import (
	"encoding/json"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// This file holds the compiled, immutable form of a configuration. Requests
// read it concurrently and never change or re-validate it.

// Set is a validated configuration: every graph compiled, every reference
// resolved, every default applied.
type Set struct {
	Server    Server
	Store     Store
	Telemetry Telemetry
	// Providers holds every usable provider: the built-in defaults merged
	// with the file's `providers:` entries, keyed by name.
	Providers map[string]Provider
	// MCPServers holds every entry of `mcp_servers:`, keyed by name.
	MCPServers map[string]*MCPServer
	// Memory holds every memory slot of `memory:`, keyed by name.
	Memory map[string]*MemorySlot
	// Guardrails holds every entry of `guardrails:`, keyed by name.
	Guardrails map[string]*Guardrail
	// Graphs are keyed by model name.
	Graphs map[string]*Graph
	// GraphNames lists the keys of Graphs, sorted.
	GraphNames []string
}

// Server is the compiled `server:` section.
type Server struct {
	Listen        string // default 127.0.0.1:8080
	SessionHeader string // default X-Session-Id
	Passthrough   bool
	MaxBodyBytes  int64         // default 4 MiB
	APIKeys       []APIKey      // empty: no auth
	DrainTimeout  time.Duration // default 30s; graceful shutdown bound
	// IdleTimeout closes idle keep-alive connections (default 60s),
	// ReadTimeout bounds a request's headers and body (default 30s), and
	// StreamWriteTimeout drops a stream client that takes no bytes
	// (default 30s).
	IdleTimeout        time.Duration
	ReadTimeout        time.Duration
	StreamWriteTimeout time.Duration
}

// APIKey is one accepted bearer key and the principal it stands for.
type APIKey struct {
	Name string
	Key  string
	// Limits are the key's rate limits; the zero value limits nothing.
	Limits Limits
}

// Store is the compiled `store:` section.
type Store struct {
	URL        string        // default memory://
	SessionTTL time.Duration // default 24h
	Timeout    time.Duration // default 2s; bound on one store operation
	LockLease  time.Duration // default 30s
	// WaitReplicas is how many Redis replicas must have a save before it
	// counts as done (WAIT); 0 waits for none.
	WaitReplicas int
	// MaxSessionBytes bounds a stored transcript (default 16 MiB).
	MaxSessionBytes int64
}

// Telemetry is the compiled `telemetry:` section.
type Telemetry struct {
	ServiceName    string // default switchboard
	OTLPEndpoint   string // empty: no export
	CaptureContent bool
}

// Provider is one upstream: an OpenAI-compatible endpoint, or the built-in
// offline demo model when Kind is "demo".
type Provider struct {
	Name    string
	Kind    ProviderKind // ProviderOpenAI (any OpenAI-compatible endpoint) or ProviderDemo
	BaseURL string
	APIKey  string
	Timeout time.Duration // default 120s, per provider call
	// MaxRetries is how many times a call that fails before its first byte
	// (429, 5xx, connection refused or reset) is retried; nil means the
	// providers package's default (2), 0 never retries.
	MaxRetries *int
	// StreamIdleTimeout fails a stream that stalls this long between
	// chunks; 0 means the providers package's default (60s).
	StreamIdleTimeout time.Duration
	// Headers are sent with every request to this provider.
	Headers map[string]string
	// MaxResponseBytes bounds one answer's body; 0 means the default
	// (32 MiB).
	MaxResponseBytes int64
}

// ModelRef names a model at a provider: "openai/gpt-4o-mini" is
// {Provider: "openai", Model: "gpt-4o-mini"}.
type ModelRef struct {
	Provider string
	Model    string
}

// String returns the ref as written in config, "provider/model".
func (m ModelRef) String() string { return m.Provider + "/" + m.Model }

// Graph is one model name clients can use: a lead agent and every agent it
// can reach through handoffs.
type Graph struct {
	Name        string
	Description string
	Lead        *Agent
	// Agents holds the lead and every agent reachable from it through
	// handoffs (enabled_when ignored), keyed by name.
	Agents      map[string]*Agent
	MaxHandoffs int // default 5
	MaxSteps    int // default 20
	// MaxToolCallsPerTurn bounds the tool calls of one model turn that are
	// run (default 64); ToolConcurrency the server tools running at once
	// (default 8).
	MaxToolCallsPerTurn int
	ToolConcurrency     int
	// Memory lists the graph's memory slots, in the order of its `memory:`.
	Memory []*MemorySlot
	// MemoryTools are the remember_ and recall_ tools of Memory, two per
	// slot in the same order, offered to every agent of the graph whose
	// run has a value for the slot's scope.
	MemoryTools []*Tool
	// Instructions are appended, after a blank line, to the instructions
	// of every agent running in the graph, sub-agents included; empty:
	// none.
	Instructions string
	// MaxTokensPerRun bounds the tokens of every model call of one run,
	// sub-agents included; 0: no budget.
	MaxTokensPerRun int64
	// InputGuardrails and OutputGuardrails apply to every run of the
	// graph, before its agents' own, in the order of the config.
	InputGuardrails  []*Guardrail
	OutputGuardrails []*Guardrail
	// Permissions are read before the active agent's (docs/permissions.md).
	Permissions []Rule
	// ApprovalTTL is how long an approval lives (default 24h), and how
	// long a decided one is kept.
	ApprovalTTL time.Duration
	// PreToolCall is asked about every call the gateway would execute
	// before the rules are read (docs/permissions.md); nil: no hook.
	PreToolCall *Hook
	// OnApprovalRequired is POSTed the approvals of a run that pauses for
	// new ones; nil: no hook.
	OnApprovalRequired *Hook
}

// Agent is one compiled agent. Agents are shared between graphs.
type Agent struct {
	Name         string
	Description  string
	Instructions string
	// Models lists the model and its fallbacks, tried in order.
	Models []ModelRef
	// Tools are the agent's server tools, its sub-agent tools (Kind
	// ToolAgent) last.
	Tools    []*Tool
	Handoffs []*Handoff
	// Subagents are the agent's sub-agent tools, in the order of its
	// `subagents:`; each is also in Tools.
	Subagents []*Tool
	// Settings go with every model call of the agent; nil: none.
	Settings *ModelSettings
	// MCP lists the MCP servers whose allowed tools the agent offers, in
	// the order of its `mcp:`.
	MCP []*MCPServer
	// InputGuardrails check the input of a run the agent starts or is
	// handed; OutputGuardrails what it says. In the order of the config.
	InputGuardrails  []*Guardrail
	OutputGuardrails []*Guardrail
	// Permissions are read after the graph's.
	Permissions []Rule
}

// Tool is a server-side tool run by the gateway. It is a small tagged
// union: Kind says which one of the kind fields is set (HTTP today; MCP,
// agent and memory tools are new kinds, each with its own field). The
// runtime dispatches a call to the runner registered for its kind.
type Tool struct {
	Name        string
	Description string
	// Parameters is the JSON Schema sent to the model.
	Parameters json.RawMessage
	Kind       ToolKind
	// HTTP is set when Kind is ToolHTTP.
	HTTP *HTTPTool
	// Memory is set when Kind is ToolMemory.
	Memory *MemoryTool
	// Agent is set when Kind is ToolAgent.
	Agent *AgentTool
	// MCP is set when Kind is ToolMCP.
	MCP *MCPTool
}

// HTTPTool is a tool run by a POST of the call's JSON arguments to URL,
// whose response body is the result.
type HTTPTool struct {
	URL     string
	Timeout time.Duration // default DefaultToolTimeout
}

// Handoff is one handoff of an agent, offered to the model as a tool.
type Handoff struct {
	// Target is the agent that takes over.
	Target      *Agent
	ToolName    string
	Description string
	// Parameters is the input schema as JSON, sent as the tool's parameters.
	Parameters json.RawMessage
	// Schema validates the call's arguments.
	Schema *jsonschema.Schema
	// ArgOrder lists the schema's top-level properties in the order the
	// config wrote them; the routing note lists arguments in this order.
	ArgOrder []string
	// Filters apply in order; empty means `all`.
	Filters     []Filter
	EnabledWhen *Condition // nil: always enabled
	OnHandoff   *Hook      // nil: no hook
}

// FilterKind names an input filter.
type FilterKind string

// The input filters of docs/handoffs.md.
const (
	FilterAll             FilterKind = "all"
	FilterRemoveToolCalls FilterKind = "remove_tool_calls"
	FilterLastUserMessage FilterKind = "last_user_message"
	FilterNestHistory     FilterKind = "nest_history"
	FilterKeepLast        FilterKind = "keep_last"
)

// Filter is one input filter; N is set for keep_last.
type Filter struct {
	Kind FilterKind
	N    int
}

// Condition is a compiled enabled_when: all of its parts must hold.
type Condition struct {
	Metadata  map[string]string // nil: no metadata condition
	Principal string            // empty: no principal condition
}

// Holds reports whether the condition holds for a request's metadata and
// principal.
func (c *Condition) Holds(metadata map[string]string, principal string) bool {
	if c == nil {
		return true
	}
	if c.Principal != "" && c.Principal != principal {
		return false
	}
	for k, v := range c.Metadata {
		got, ok := metadata[k]
		if !ok || got != v {
			return false
		}
	}
	return true
}

// Hook is a webhook of the config: a handoff's on_handoff, a graph's
// pre_tool_call or on_approval_required.
type Hook struct {
	URL     string
	Timeout time.Duration // default 5s; 2s for pre_tool_call
}
