package graphs

import "time"

// This file is the one place where Switchboard's defaults and kinds are
// declared (docs/config.md lists them for users). The store, the providers
// and the compiler read them from here instead of repeating them.

// Defaults of the `server:` section.
const (
	DefaultListen        = "127.0.0.1:8080"
	DefaultSessionHeader = "X-Session-Id"
	DefaultMaxBodyBytes  = 4 << 20
	DefaultDrainTimeout  = 30 * time.Second
)

// Defaults of the `store:` section.
const (
	DefaultStoreURL     = "memory://"
	DefaultSessionTTL   = 24 * time.Hour
	DefaultStoreTimeout = 2 * time.Second
	DefaultLockLease    = 30 * time.Second
)

// Defaults of the `telemetry:` section.
const DefaultServiceName = "switchboard"

// Defaults of providers, tools, hooks and graphs.
const (
	// DefaultProviderTimeout bounds one provider call.
	DefaultProviderTimeout = 120 * time.Second
	// DefaultProviderRetries is how many times a call that fails before its
	// first byte is retried.
	DefaultProviderRetries = 2
	// DefaultStreamIdleTimeout fails a stream that sends nothing this long.
	DefaultStreamIdleTimeout = 60 * time.Second
	DefaultToolTimeout       = 30 * time.Second
	DefaultHookTimeout       = 5 * time.Second
	// DefaultPreToolCallTimeout bounds a pre_tool_call hook's answer: the
	// call waits for it, so it is shorter than the other hooks'.
	DefaultPreToolCallTimeout = 2 * time.Second
	// DefaultMCPTimeout bounds one call of an MCP server's tool.
	DefaultMCPTimeout  = 30 * time.Second
	DefaultMaxHandoffs = 5
	DefaultMaxSteps    = 20
)

// ProviderKind tells how a provider is called.
type ProviderKind = string

// The provider kinds.
const (
	// ProviderOpenAI is any OpenAI-compatible Chat Completions endpoint.
	ProviderOpenAI ProviderKind = "openai"
	// ProviderDemo is the built-in offline demo model.
	ProviderDemo ProviderKind = "demo"
)

// ToolKind tells what runs a server-side tool; Tool holds one field per kind.
type ToolKind string

// The tool kinds. MCP, agent and memory tools come next, each a new kind
// with its own field on Tool and its own runner (runtime.ToolKinds).
const (
	// ToolHTTP is a POST of the call's arguments to a URL (Tool.HTTP).
	ToolHTTP ToolKind = "http"
	// ToolMemory remembers into or recalls from a memory slot
	// (Tool.Memory).
	ToolMemory ToolKind = "memory"
	// ToolAgent runs another agent as a sub-agent (Tool.Agent).
	ToolAgent ToolKind = "agent"
	// ToolMCP is a tool of an MCP server (Tool.MCP), offered once the
	// gateway has listed it (package mcptools).
	ToolMCP ToolKind = "mcp"
)
