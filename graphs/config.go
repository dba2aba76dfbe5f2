package graphs

import "go.yaml.in/yaml/v3"

// This file holds the raw form of a configuration file, as written in YAML.
// Nothing here is validated or defaulted; compile.go turns it into a Set.
// Fields whose YAML may take several shapes (a string or a list, a string or
// a mapping) or whose key order matters (JSON Schemas) are kept as yaml.Node
// and interpreted by the compiler, which knows where they sit and can name
// them in its problems.

// rawConfig is the whole file.
type rawConfig struct {
	// Server configures the HTTP listener and authentication.
	Server rawServer `yaml:"server"`
	// Store configures where sessions live.
	Store rawStore `yaml:"store"`
	// Telemetry configures tracing.
	Telemetry rawTelemetry `yaml:"telemetry"`
	// Providers override or add to the built-in providers, by name.
	Providers map[string]rawProvider `yaml:"providers"`
	// Tools are the server-side tools agents may use, by name; the name is
	// the function name the model sees.
	Tools map[string]rawTool `yaml:"tools"`
	// MCPServers are the MCP servers whose tools agents may use, by name.
	MCPServers map[string]rawMCPServer `yaml:"mcp_servers"`
	// Memory holds the memory slots graphs may use, by name (memory.go).
	Memory map[string]rawMemorySlot `yaml:"memory"`
	// Guardrails are the input and output checks graphs and agents may
	// list, by name (guardrails.go).
	Guardrails map[string]rawGuardrail `yaml:"guardrails"`
	// Agents are keyed by name.
	Agents map[string]rawAgent `yaml:"agents"`
	// Graphs are keyed by the model name clients use. At least one is
	// required.
	Graphs map[string]rawGraph `yaml:"graphs"`
}

// rawServer is the `server:` section.
type rawServer struct {
	// Listen is the address to listen on; default 127.0.0.1:8080.
	// SWITCHBOARD_LISTEN overrides it.
	Listen string `yaml:"listen"`
	// SessionHeader is the request header that carries the session id;
	// default X-Session-Id.
	SessionHeader string `yaml:"session_header"`
	// Passthrough proxies a model "vendor/model" that is not a graph as is;
	// default false.
	Passthrough bool `yaml:"passthrough"`
	// MaxBodyBytes bounds a request body, in bytes; default 4 MiB.
	MaxBodyBytes *int64 `yaml:"max_body_bytes"`
	// DrainTimeout bounds graceful shutdown, a Go duration; default 30s.
	DrainTimeout string `yaml:"drain_timeout"`
	// APIKeys are the accepted bearer keys; absent or empty means no auth.
	APIKeys []rawAPIKey `yaml:"api_keys"`
	// IdleTimeout closes a keep-alive connection idle this long, a Go
	// duration; default 60s.
	IdleTimeout string `yaml:"idle_timeout"`
	// ReadTimeout bounds the arrival of a request's headers and body, a Go
	// duration; default 30s.
	ReadTimeout string `yaml:"read_timeout"`
	// StreamWriteTimeout drops a stream client that takes no bytes for
	// this long and cancels its run, a Go duration; default 30s.
	StreamWriteTimeout string `yaml:"stream_write_timeout"`
}

// rawAPIKey is one entry of `server.api_keys`.
type rawAPIKey struct {
	// Name is the principal the key stands for; required and unique.
	Name string `yaml:"name"`
	// Key is the bearer token; required and unique.
	Key string `yaml:"key"`
	// Limits are the key's rate limits; default none.
	Limits *rawLimits `yaml:"limits"`
}

// rawStore is the `store:` section.
type rawStore struct {
	// URL selects the backend; default memory://. SWITCHBOARD_STORE_URL
	// overrides it.
	URL string `yaml:"url"`
	// SessionTTL is how long an idle session is kept, a Go duration;
	// default 24h.
	SessionTTL string `yaml:"session_ttl"`
	// Timeout bounds one store operation, a Go duration; default 2s.
	Timeout string `yaml:"timeout"`
	// LockLease is how long a dead gateway can hold a session, a Go
	// duration; default 30s.
	LockLease string `yaml:"lock_lease"`
	// MaxSessionBytes bounds a stored transcript, in bytes of its JSON
	// messages; default 16 MiB.
	MaxSessionBytes *int64 `yaml:"max_session_bytes"`
	// WaitReplicas makes every save wait until this many replicas have
	// it (Redis WAIT); default 0, no waiting. Needs a Redis store.
	WaitReplicas *int `yaml:"wait_replicas"`
}

// rawTelemetry is the `telemetry:` section.
type rawTelemetry struct {
	// ServiceName is the OpenTelemetry service name; default switchboard.
	// OTEL_SERVICE_NAME overrides it.
	ServiceName string `yaml:"service_name"`
	// OTLPEndpoint is the OTLP/HTTP base URL; empty (the default) means no
	// export. OTEL_EXPORTER_OTLP_ENDPOINT overrides it.
	OTLPEndpoint string `yaml:"otlp_endpoint"`
	// CaptureContent records prompts and completions on spans; default
	// false.
	CaptureContent bool `yaml:"capture_content"`
}

// rawProvider is one entry of `providers:`. Each field that is set
// overrides the built-in provider of the same name, if any.
type rawProvider struct {
	// BaseURL is the OpenAI-compatible endpoint; required unless the
	// provider is built in.
	BaseURL string `yaml:"base_url"`
	// APIKey is sent as a bearer token; default none (or the built-in's).
	APIKey string `yaml:"api_key"`
	// Timeout bounds one provider call, a Go duration; default 120s.
	Timeout string `yaml:"timeout"`
	// MaxRetries is how many times a call that fails before its first byte
	// (429, 5xx, connection refused or reset) is retried, with jittered
	// backoff; default 2, 0 never retries.
	MaxRetries *int `yaml:"max_retries"`
	// StreamIdleTimeout fails a streamed call whose provider sends nothing
	// for this long once it has started, a Go duration; default 60s.
	StreamIdleTimeout string `yaml:"stream_idle_timeout"`
	// Headers are sent with every request; they are merged key by key
	// over the built-in's headers.
	Headers map[string]string `yaml:"headers"`
	// MaxResponseBytes bounds one answer's body, in bytes; default 32 MiB.
	MaxResponseBytes *int64 `yaml:"max_response_bytes"`
}

// rawTool is one entry of `tools:`.
type rawTool struct {
	// Description tells the model what the tool does; default empty.
	Description string `yaml:"description"`
	// Parameters is the JSON Schema of the arguments; default
	// {type: object, properties: {}}.
	Parameters yaml.Node `yaml:"parameters"`
	// HTTP says where the tool runs; required.
	HTTP *rawHTTP `yaml:"http"`
}

// rawHTTP is a webhook: a tool's `http:`, a handoff's `on_handoff:`, a
// graph's `pre_tool_call:` or `on_approval_required:`.
type rawHTTP struct {
	// URL receives a POST of the JSON payload; required.
	URL string `yaml:"url"`
	// Timeout bounds one call, a Go duration; default 30s for tools, 2s
	// for pre_tool_call, 5s for the other hooks.
	Timeout string `yaml:"timeout"`
}

// rawAgent is one entry of `agents:`.
type rawAgent struct {
	// Description says what the agent does; it is the default description
	// of handoffs to it, so an agent that is a handoff target needs one
	// unless every such handoff has its own.
	Description string `yaml:"description"`
	// Instructions open the agent's system prompt; default empty.
	Instructions string `yaml:"instructions"`
	// Model is "provider/model", or a list of them tried in order;
	// required.
	Model yaml.Node `yaml:"model"`
	// Tools name entries of the top-level `tools:`; default none.
	Tools []string `yaml:"tools"`
	// MCP name entries of `mcp_servers:` whose allowed tools the agent
	// offers; default none.
	MCP []string `yaml:"mcp"`
	// Handoffs are the agents this one can hand the run to; each item is
	// a target agent name or a rawHandoff mapping; default none.
	Handoffs []yaml.Node `yaml:"handoffs"`
	// Subagents are the agents this one can ask as tools, staying in
	// charge; each item is an agent name or a rawSubagent mapping;
	// default none.
	Subagents []yaml.Node `yaml:"subagents"`
	// ModelSettings go with every model call of the agent, over the
	// client's parameters of the same name; default none.
	ModelSettings *rawModelSettings `yaml:"model_settings"`
	// InputGuardrails and OutputGuardrails name entries of `guardrails:`
	// checked when the agent starts a run and on what it says; default
	// none.
	InputGuardrails  []string `yaml:"input_guardrails"`
	OutputGuardrails []string `yaml:"output_guardrails"`
	// Permissions are read after the graph's; default none.
	Permissions []rawRule `yaml:"permissions"`
}

// rawHandoff is the long form of a handoff item.
type rawHandoff struct {
	// Agent is the target agent's name; required.
	Agent string `yaml:"agent"`
	// ToolName is the function name offered to the model; default
	// transfer_to_<agent> (see DeriveToolName).
	ToolName string `yaml:"tool_name"`
	// Description tells the model when to hand off; default the target's
	// description.
	Description string `yaml:"description"`
	// InputSchema is the JSON Schema of the handoff's arguments; default
	// {type: object, properties: {reason: {type: string}}}.
	InputSchema yaml.Node `yaml:"input_schema"`
	// InputFilter is a filter name, a {keep_last: N} mapping, or a list of
	// those; default all.
	InputFilter yaml.Node `yaml:"input_filter"`
	// EnabledWhen restricts when the handoff is offered; default always.
	EnabledWhen *rawCondition `yaml:"enabled_when"`
	// OnHandoff is called before the target's first model call; default
	// none.
	OnHandoff *rawHTTP `yaml:"on_handoff"`
}

// rawCondition is a handoff's `enabled_when:`; all of its parts must hold.
type rawCondition struct {
	// Metadata pairs must all be in the request's metadata; scalar values
	// are compared as strings.
	Metadata yaml.Node `yaml:"metadata"`
	// Principal must be the caller's API key name.
	Principal string `yaml:"principal"`
}

// rawGraph is one entry of `graphs:`.
type rawGraph struct {
	// Lead is the agent a run starts at; required.
	Lead string `yaml:"lead"`
	// Description is shown in the models list; default empty.
	Description string `yaml:"description"`
	// MaxHandoffs bounds the handoffs of one run; default 5.
	MaxHandoffs *int `yaml:"max_handoffs"`
	// MaxSteps bounds the model calls of one run, across agents;
	// default 20.
	MaxSteps *int `yaml:"max_steps"`
	// MaxToolCallsPerTurn bounds the tool calls of one model turn that
	// are run; default 64.
	MaxToolCallsPerTurn *int `yaml:"max_tool_calls_per_turn"`
	// ToolConcurrency bounds the server tools of one turn running at once;
	// default 8.
	ToolConcurrency *int `yaml:"tool_concurrency"`
	// Memory names entries of the top-level `memory:` that every agent of
	// the graph remembers into and recalls from; default none.
	Memory []string `yaml:"memory"`
	// Instructions are appended, after a blank line, to the instructions
	// of every agent running in the graph; default none.
	Instructions string `yaml:"instructions"`
	// MaxTokensPerRun bounds the tokens (input + output) of every model
	// call of one run, sub-agents included; default none.
	MaxTokensPerRun *int64 `yaml:"max_tokens_per_run"`
	// InputGuardrails and OutputGuardrails name entries of `guardrails:`
	// checked on every run of the graph, before the agents' own; default
	// none.
	InputGuardrails  []string `yaml:"input_guardrails"`
	OutputGuardrails []string `yaml:"output_guardrails"`
	// Permissions gate the calls of the graph's agents, read before the
	// agent's own; default none.
	Permissions []rawRule `yaml:"permissions"`
	// ApprovalTTL is how long an approval lives; default 24h.
	ApprovalTTL string `yaml:"approval_ttl"`
	// PreToolCall is asked about every call the gateway would execute,
	// before the rules are read; default none. Its timeout defaults to 2s.
	PreToolCall *rawHTTP `yaml:"pre_tool_call"`
	// OnApprovalRequired is told when a run pauses with new approvals;
	// default none. Its timeout defaults to 5s.
	OnApprovalRequired *rawHTTP `yaml:"on_approval_required"`
}
