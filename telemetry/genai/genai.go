// Package genai names the span attributes Switchboard records: the
// OpenTelemetry GenAI semantic conventions plus Switchboard's own handoff
// attributes. It imports nothing but otel/attribute so that the run loop can
// use it without depending on the telemetry setup (which depends on runtime).
package genai

import "go.opentelemetry.io/otel/attribute"

// GenAI semantic convention attribute keys
// (https://opentelemetry.io/docs/specs/semconv/gen-ai/).
const (
	// OperationName is gen_ai.operation.name; values are the Operation* constants.
	OperationName attribute.Key = "gen_ai.operation.name"
	// AgentName is gen_ai.agent.name, the agent running in an invoke_agent span.
	AgentName attribute.Key = "gen_ai.agent.name"
	// AgentDescription is gen_ai.agent.description.
	AgentDescription attribute.Key = "gen_ai.agent.description"
	// ConversationID is gen_ai.conversation.id, Switchboard's session id.
	ConversationID attribute.Key = "gen_ai.conversation.id"
	// ProviderName is gen_ai.provider.name, the provider a chat span calls.
	ProviderName attribute.Key = "gen_ai.provider.name"
	// RequestModel is gen_ai.request.model, the provider-side model asked for.
	RequestModel attribute.Key = "gen_ai.request.model"
	// ResponseModel is gen_ai.response.model, the model the provider says answered.
	ResponseModel attribute.Key = "gen_ai.response.model"
	// ResponseID is gen_ai.response.id, the provider's completion id.
	ResponseID attribute.Key = "gen_ai.response.id"
	// ResponseFinishReasons is gen_ai.response.finish_reasons (a string slice).
	ResponseFinishReasons attribute.Key = "gen_ai.response.finish_reasons"
	// UsageInputTokens is gen_ai.usage.input_tokens.
	UsageInputTokens attribute.Key = "gen_ai.usage.input_tokens"
	// UsageOutputTokens is gen_ai.usage.output_tokens.
	UsageOutputTokens attribute.Key = "gen_ai.usage.output_tokens"
	// ToolName is gen_ai.tool.name.
	ToolName attribute.Key = "gen_ai.tool.name"
	// ToolCallID is gen_ai.tool.call.id, the model's id for the call.
	ToolCallID attribute.Key = "gen_ai.tool.call.id"
	// ToolType is gen_ai.tool.type; Switchboard's tools are all "function".
	ToolType attribute.Key = "gen_ai.tool.type"

	// InputMessages is gen_ai.input.messages; recorded only with capture_content.
	InputMessages attribute.Key = "gen_ai.input.messages"
	// OutputMessages is gen_ai.output.messages; recorded only with capture_content.
	OutputMessages attribute.Key = "gen_ai.output.messages"
	// SystemInstructions is gen_ai.system_instructions; recorded only with capture_content.
	SystemInstructions attribute.Key = "gen_ai.system_instructions"
	// ToolCallArguments is gen_ai.tool.call.arguments; recorded only with capture_content.
	ToolCallArguments attribute.Key = "gen_ai.tool.call.arguments"
	// ToolCallResult is gen_ai.tool.call.result; recorded only with capture_content.
	ToolCallResult attribute.Key = "gen_ai.tool.call.result"

	// ErrorType is error.type, the general convention for why an operation failed.
	ErrorType attribute.Key = "error.type"
)

// Values of OperationName used by Switchboard; span names start with them
// ("invoke_agent triage", "chat gpt-4o-mini", "execute_tool lookup").
const (
	// OperationInvokeAgent is an agent taking the run.
	OperationInvokeAgent = "invoke_agent"
	// OperationChat is one provider call.
	OperationChat = "chat"
	// OperationExecuteTool is one server-side tool call.
	OperationExecuteTool = "execute_tool"
)

// Switchboard's own attribute keys.
const (
	// Graph is switchboard.graph, the graph (model name) a run serves.
	Graph attribute.Key = "switchboard.graph"
	// HandoffFrom is switchboard.handoff.from, the agent handing off.
	HandoffFrom attribute.Key = "switchboard.handoff.from"
	// HandoffTo is switchboard.handoff.to, the agent the handoff targets.
	HandoffTo attribute.Key = "switchboard.handoff.to"
	// HandoffToolName is switchboard.handoff.tool_name, the handoff tool the model called.
	HandoffToolName attribute.Key = "switchboard.handoff.tool_name"
	// HandoffToolCallID is switchboard.handoff.tool_call_id.
	HandoffToolCallID attribute.Key = "switchboard.handoff.tool_call_id"
	// HandoffOutcome is switchboard.handoff.outcome: accepted, invalid_args,
	// limit_exceeded, extra_in_turn or denied.
	HandoffOutcome attribute.Key = "switchboard.handoff.outcome"
	// PermissionDecision is switchboard.permission.decision, on a
	// permission.decision event: allowed, denied, pending, approved,
	// rejected or expired.
	PermissionDecision attribute.Key = "switchboard.permission.decision"
	// PermissionSource is switchboard.permission.source: rule, hook,
	// default, remembered or approver.
	PermissionSource attribute.Key = "switchboard.permission.source"
	// PermissionHookAction is switchboard.permission.hook.action, the
	// action a pre_tool_call hook answered, on its span.
	PermissionHookAction attribute.Key = "switchboard.permission.hook.action"
)

// EventPermissionDecision is the span event of a permission gate's decision.
const EventPermissionDecision = "permission.decision"
