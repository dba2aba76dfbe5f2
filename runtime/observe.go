package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/switchboard-ai/switchboard/internal/redact"
	"github.com/switchboard-ai/switchboard/telemetry/genai"
)

// observer is the Runner's own Interceptor: the spans of docs/spans.md and
// the run's metrics. It is the outermost interceptor but for the budget
// (budget.go, which refuses a call before it starts), so that a gate
// or guardrail inside it runs under the call's span (and may add events to
// it, trace.SpanFromContext) and its time is counted in the call's.
type observer struct {
	tracer         trace.Tracer
	metrics        Metrics
	log            *slog.Logger
	captureContent bool
	// quiet is set when the tracer provider records nothing (no exporter
	// configured): a span is then not even started, for starting one
	// still allocated its name, its options and the context that carries
	// it, on every agent and model call of every request (issue 22).
	quiet bool
}

// quietSpan is what the observer's spans are when it is quiet: it
// records nothing, and ending it does nothing.
var quietSpan = trace.SpanFromContext(context.Background())

var _ Interceptor = (*observer)(nil)

// TracingOff reports whether tp records nothing: nil or the no-op
// provider, which the gateway runs with when no exporter is configured.
// The runtime, the provider client and the HTTP middleware then start no
// span at all, since starting one still allocates its name, its options
// and the context that carries it.
func TracingOff(tp trace.TracerProvider) bool {
	switch tp.(type) {
	case nil, noop.TracerProvider, *noop.TracerProvider:
		return true
	}
	return false
}

// InterceptRun adds nothing: a run's span is the request's, the gateway's.
func (o *observer) InterceptRun(next RunFunc) RunFunc { return next }

// InterceptAgent opens the invoke_agent span of an agent taking the run;
// the agent's model, tool and handoff spans are its children.
//
// This closure and InterceptModel's stay on the stack of a request's
// goroutine for as long as its stream lasts, so they keep small frames:
// setting attributes, which needs large ones, is done in functions that
// return before the call is made or start after it (issue 22).
func (o *observer) InterceptAgent(next AgentFunc) AgentFunc {
	return func(ctx context.Context, call *AgentCall) error {
		ctx, span := o.startAgent(ctx, call)
		err := next(ctx, call)
		endSpan(span, err)
		return err
	}
}

func (o *observer) startAgent(ctx context.Context, call *AgentCall) (context.Context, trace.Span) {
	if o.quiet {
		return ctx, quietSpan
	}
	ctx, span := o.tracer.Start(ctx, "invoke_agent "+call.Agent.Name, trace.WithSpanKind(trace.SpanKindInternal))
	if span.IsRecording() {
		span.SetAttributes(
			genai.OperationName.String(genai.OperationInvokeAgent),
			genai.AgentName.String(call.Agent.Name),
			genai.Graph.String(call.Run.Graph.Name),
		)
		// A sub-agent's run belongs to its caller's session (CONTRACT §5:
		// every invoke_agent span names the conversation).
		if id := call.Run.sessionOfRun(); id != "" {
			span.SetAttributes(genai.ConversationID.String(id))
		}
	}
	return ctx, span
}

// InterceptModel traces and counts one provider call.
func (o *observer) InterceptModel(next ModelFunc) ModelFunc {
	return func(ctx context.Context, call *ModelCall) (*ChatResponse, error) {
		ctx, span := o.startModel(ctx, call)
		start := time.Now()
		resp, err := next(ctx, call)
		return o.endModel(span, call, time.Since(start), resp, err)
	}
}

func (o *observer) startModel(ctx context.Context, call *ModelCall) (context.Context, trace.Span) {
	if o.quiet {
		return ctx, quietSpan
	}
	ref := call.Request.Model
	ctx, span := o.tracer.Start(ctx, "chat "+ref.Model, trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		span.SetAttributes(
			genai.OperationName.String(genai.OperationChat),
			genai.ProviderName.String(ref.Provider),
			genai.RequestModel.String(ref.Model),
			genai.AgentName.String(call.Agent.Name),
		)
		if o.captureContent {
			if b, err := json.Marshal(call.Request.Messages.Flat()); err == nil {
				span.SetAttributes(genai.InputMessages.String(string(b)))
			}
		}
	}
	return ctx, span
}

// endModel records a model call that took took and ends its span.
func (o *observer) endModel(span trace.Span, call *ModelCall, took time.Duration, resp *ChatResponse, err error) (*ChatResponse, error) {
	ref := call.Request.Model
	d := took.Seconds()
	if err != nil {
		// An interceptor's Halt (a guardrail that tripped) is no
		// failure of the provider's.
		if h := (*Halt)(nil); errors.As(err, &h) {
			o.metrics.ModelCall(ref.Provider, ref.Model, d, h.CallUsage, false)
			span.SetAttributes(genai.ResponseFinishReasons.StringSlice([]string{h.FinishReason}))
			if u := h.CallUsage; u != (Usage{}) {
				span.SetAttributes(genai.UsageInputTokens.Int(u.PromptTokens), genai.UsageOutputTokens.Int(u.CompletionTokens))
			}
			span.End()
			return nil, err
		}
		o.metrics.ModelCall(ref.Provider, ref.Model, d, Usage{}, true)
		endSpan(span, err)
		return nil, err
	}
	o.metrics.ModelCall(ref.Provider, ref.Model, d, resp.Usage, false)
	if span.IsRecording() {
		span.SetAttributes(
			genai.UsageInputTokens.Int(resp.Usage.PromptTokens),
			genai.UsageOutputTokens.Int(resp.Usage.CompletionTokens),
			genai.ResponseFinishReasons.StringSlice([]string{resp.FinishReason}),
		)
		if resp.ID != "" {
			span.SetAttributes(genai.ResponseID.String(resp.ID))
		}
		if o.captureContent {
			if b, err := json.Marshal([]Message{resp.Message}); err == nil {
				span.SetAttributes(genai.OutputMessages.String(string(b)))
			}
		}
	}
	span.End()
	return resp, nil
}

// attrMCPServer names the MCP server of an MCP tool's execute_tool span.
const attrMCPServer = attribute.Key("switchboard.mcp.server")

// InterceptTool traces and counts a server tool call (an execute_tool span
// around it) or a handoff call (a handoff span with its outcome).
func (o *observer) InterceptTool(next ToolFunc) ToolFunc {
	// The span's start and end are in functions of their own, so that
	// only a small frame is on the stack while the tool runs: a handoff
	// runs under it, and the stream that follows it on the same goroutine
	// must stay under 7 KB deep (issue 22).
	return func(ctx context.Context, call *ToolInvocation) (ToolResult, error) {
		if call.Handoff != nil {
			return o.handoff(ctx, call, next)
		}
		ctx, span := o.startTool(ctx, call)
		start := time.Now()
		res, err := next(ctx, call)
		o.endTool(span, call, start, &res, err)
		return res, err
	}
}

// startTool starts a tool call's span.
func (o *observer) startTool(ctx context.Context, call *ToolInvocation) (context.Context, trace.Span) {
	if o.quiet {
		return ctx, quietSpan
	}
	ctx, span := o.tracer.Start(ctx, "execute_tool "+call.Tool.Name, trace.WithSpanKind(trace.SpanKindInternal))
	if span.IsRecording() {
		span.SetAttributes(
			genai.OperationName.String(genai.OperationExecuteTool),
			genai.ToolName.String(call.Tool.Name),
			genai.ToolCallID.String(call.Call.ID),
		)
		if t := call.Tool.MCP; t != nil && t.Server != nil {
			span.SetAttributes(attrMCPServer.String(t.Server.Name))
		}
	}
	return ctx, span
}

// endTool records a tool call's outcome, begun at start, and ends its span.
func (o *observer) endTool(span trace.Span, call *ToolInvocation, start time.Time, res *ToolResult, err error) {
	o.permission(span, call)
	if res.Suspend == "" {
		failed := err != nil || res.Code != ""
		o.metrics.ToolCall(call.Tool.Name, time.Since(start).Seconds(), failed)
	}
	cause := err
	if cause == nil && res.Code != "" {
		cause = res.Err
		if cause == nil {
			cause = &toolFailure{code: res.Code}
		}
		o.log.Warn("tool failed", "tool", call.Tool.Name, "call", call.Call.ID, "code", res.Code, "err", cause)
	}
	endSpan(span, cause)
}

// handoff records a handoff call as a span and a count once its outcome is
// known; a refused one is an error. A suspended call has no outcome yet:
// it has a span (outcome pending) only when the gate held it just now, to
// carry that decision, and is not counted.
func (o *observer) handoff(ctx context.Context, call *ToolInvocation, next ToolFunc) (ToolResult, error) {
	res, err := next(ctx, call)
	if err != nil || (res.Suspend != "" && call.perm == nil) {
		return res, err
	}
	o.recordHandoff(ctx, call, &res)
	return res, nil
}

// recordHandoff records the outcome of a handoff call.
func (o *observer) recordHandoff(ctx context.Context, call *ToolInvocation, res *ToolResult) {
	outcome := res.Code
	switch {
	case res.Suspend != "":
		outcome = outcomePending
	case outcome == "":
		outcome = outcomeAccepted
	}
	from, to := call.Agent.Name, call.Handoff.Target.Name
	span := quietSpan
	if !o.quiet {
		_, span = o.tracer.Start(ctx, "handoff "+from+" -> "+to, trace.WithSpanKind(trace.SpanKindInternal))
	}
	if span.IsRecording() {
		span.SetAttributes(
			genai.HandoffFrom.String(from),
			genai.HandoffTo.String(to),
			genai.HandoffToolName.String(call.Handoff.ToolName),
			genai.HandoffToolCallID.String(call.Call.ID),
			genai.HandoffOutcome.String(outcome),
		)
		if outcome != outcomeAccepted && outcome != outcomePending {
			span.SetStatus(codes.Error, outcome)
		}
	}
	o.permission(span, call)
	span.End()
	if outcome != outcomePending {
		o.metrics.Handoff(call.Run.Graph.Name, from, to, outcome)
	}
}

// recordDecision counts and records a decision taken outside the tool
// chain, on ctx's span.
func (rn *run) recordDecision(ctx context.Context, tool, decision, source string) {
	rn.metrics.PermissionDecision(rn.graph.Name, tool, decision)
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.AddEvent(genai.EventPermissionDecision, trace.WithAttributes(
			genai.PermissionDecision.String(decision),
			genai.PermissionSource.String(source),
			genai.ToolName.String(tool),
		))
	}
}

// outcomePending is a handoff span's outcome when an approval holds it.
const outcomePending = "pending"

// permission counts the gate's decision on a call and records it as a
// permission.decision event on the call's span.
func (o *observer) permission(span trace.Span, call *ToolInvocation) {
	p := call.perm
	if p == nil {
		return
	}
	o.metrics.PermissionDecision(call.Run.Graph.Name, call.Call.Function.Name, p.decision)
	if span.IsRecording() {
		span.AddEvent(genai.EventPermissionDecision, trace.WithAttributes(
			genai.PermissionDecision.String(p.decision),
			genai.PermissionSource.String(p.source),
		))
	}
}

// toolFailure is the error of a failed tool result that gave no cause.
type toolFailure struct{ code string }

func (e *toolFailure) Error() string { return e.code }

// traceHookFailure records a failed on_handoff call on the current span.
func traceHookFailure(ctx context.Context, url string, err error) {
	span := trace.SpanFromContext(ctx)
	if span.IsRecording() {
		span.AddEvent("on_handoff failed", trace.WithAttributes(
			attribute.String("url.full", redact.URL(url)),
			attribute.String("error.message", err.Error()),
		))
	}
}

// endSpan closes a span, marking it an error when err is not nil.
func endSpan(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// nopMetrics records nothing.
type nopMetrics struct{}

func (nopMetrics) Handoff(string, string, string, string)         {}
func (nopMetrics) ModelCall(string, string, float64, Usage, bool) {}
func (nopMetrics) ToolCall(string, float64, bool)                 {}
func (nopMetrics) PermissionDecision(string, string, string)      {}
