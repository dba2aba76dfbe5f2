// Package runtime runs Switchboard's graphs: the agent loop, handoffs,
// input filters, limits and sessions. It knows nothing of HTTP, Redis or any
// provider SDK; it declares the small interfaces it needs (ports.go: Model,
// Store, HookCaller, Metrics; tools.go: ToolRunner; prehook.go:
// PreToolCallHook) and the other packages
// satisfy them. The rules it implements are in docs/handoffs.md.
//
// How the pieces fit:
//
//   - Runner.Run runs a request. With a session id, the session layer
//     (session.go, lease.go) loads and locks the session, renews its lease,
//     saves every step and releases it; without one the request's messages
//     are the transcript. Either way the agent loop (loop.go) does the rest.
//   - The agent loop runs one agent's part after another over a transcript
//     (loop.go): model calls (model.go), the tool and handoff calls of each
//     turn (turn.go, handoff.go, filters.go), the provider's messages built
//     from the transcript (prompt.go). Runner.RunAgent runs the same loop
//     for one agent over a transcript of its own, outside any session: what
//     a sub-agent tool needs.
//   - A run that must wait for someone outside (the client's tools today,
//     approvals next) suspends (suspend.go): the step is saved, the lock
//     released, and Result.Suspension lists the pending calls; the
//     session's next request resumes the turn.
//   - Interceptors (intercept.go) wrap every run, agent, model call and tool
//     call, like go-redis hooks; the Runner's own spans and metrics are one
//     (observe.go). Permission gates, guardrails and budgets are others: a
//     tool interceptor can deny a call (ToolError), rewrite its arguments,
//     or hold it (ToolResult.Suspend); a model interceptor can refuse a call
//     or end the run with its own answer (Halt).
//   - Server tools are a tagged union by kind (graphs.Tool); ToolKinds
//     dispatches each call to the ToolRunner of its kind (HTTP today, in
//     package webhooks).
//   - The run emits Events (events.go) as it goes and returns a Result; the
//     gateway renders them for its protocol. Errors wrap the sentinels of
//     errors.go and ports.go, which the gateway maps to HTTP statuses.
package runtime
