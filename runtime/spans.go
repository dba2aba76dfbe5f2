package runtime

import (
	"context"
	"encoding/json"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/telemetry/genai"
)

// startAgent opens the invoke_agent span of an agent taking the run; the
// agent's model, tool and handoff spans are its children.
func (rn *run) startAgent(ctx context.Context, a *graphs.Agent) {
	ctx, span := rn.tracer.Start(ctx, "invoke_agent "+a.Name, trace.WithSpanKind(trace.SpanKindInternal))
	if span.IsRecording() {
		span.SetAttributes(
			genai.OperationName.String(genai.OperationInvokeAgent),
			genai.AgentName.String(a.Name),
			genai.Graph.String(rn.graph.Name),
		)
		if rn.req.SessionID != "" {
			span.SetAttributes(genai.ConversationID.String(rn.req.SessionID))
		}
	}
	rn.agentCtx, rn.agentSpan = ctx, span
	rn.emit(Event{Kind: EventAgentStart, Agent: a.Name})
}

// endAgent closes the current invoke_agent span.
func (rn *run) endAgent(err error) {
	if rn.agentSpan != nil {
		endSpan(rn.agentSpan, err)
		rn.agentSpan = nil
	}
}

// startChatSpan opens the span of one provider call.
func (rn *run) startChatSpan(ctx context.Context, req *ChatRequest) (context.Context, trace.Span) {
	ctx, span := rn.tracer.Start(ctx, "chat "+req.Model.Model, trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		span.SetAttributes(
			genai.OperationName.String(genai.OperationChat),
			genai.ProviderName.String(req.Model.Provider),
			genai.RequestModel.String(req.Model.Model),
			genai.AgentName.String(rn.agent.Name),
		)
		if rn.opts.CaptureContent {
			if b, err := json.Marshal(req.Messages.Flat()); err == nil {
				span.SetAttributes(genai.InputMessages.String(string(b)))
			}
		}
	}
	return ctx, span
}

// endChatSpan records a provider call's answer and closes its span.
func (rn *run) endChatSpan(span trace.Span, resp *ChatResponse) {
	if span.IsRecording() {
		span.SetAttributes(
			genai.UsageInputTokens.Int(resp.Usage.PromptTokens),
			genai.UsageOutputTokens.Int(resp.Usage.CompletionTokens),
			genai.ResponseFinishReasons.StringSlice([]string{resp.FinishReason}),
		)
		if resp.ID != "" {
			span.SetAttributes(genai.ResponseID.String(resp.ID))
		}
		if rn.opts.CaptureContent {
			if b, err := json.Marshal([]Message{resp.Message}); err == nil {
				span.SetAttributes(genai.OutputMessages.String(string(b)))
			}
		}
	}
	span.End()
}

// startToolSpan opens the span of one server-side tool call.
func (rn *run) startToolSpan(ctx context.Context, tool, callID string) (context.Context, trace.Span) {
	ctx, span := rn.tracer.Start(ctx, "execute_tool "+tool, trace.WithSpanKind(trace.SpanKindInternal))
	if span.IsRecording() {
		span.SetAttributes(
			genai.OperationName.String(genai.OperationExecuteTool),
			genai.ToolName.String(tool),
			genai.ToolCallID.String(callID),
		)
	}
	return ctx, span
}

// traceHandoff records one handoff call as a span; a refused one is an error.
func (rn *run) traceHandoff(ctx context.Context, h *graphs.Handoff, callID, outcome string) {
	from, to := rn.agent.Name, h.Target.Name
	_, span := rn.tracer.Start(ctx, "handoff "+from+" -> "+to, trace.WithSpanKind(trace.SpanKindInternal))
	if span.IsRecording() {
		span.SetAttributes(
			genai.HandoffFrom.String(from),
			genai.HandoffTo.String(to),
			genai.HandoffToolName.String(h.ToolName),
			genai.HandoffToolCallID.String(callID),
			genai.HandoffOutcome.String(outcome),
		)
		if outcome != outcomeAccepted {
			span.SetStatus(codes.Error, outcome)
		}
	}
	span.End()
}

// traceHookFailure records a failed on_handoff call on the current span.
func traceHookFailure(ctx context.Context, url string, err error) {
	span := trace.SpanFromContext(ctx)
	if span.IsRecording() {
		span.AddEvent("on_handoff failed", trace.WithAttributes(
			attribute.String("url.full", url),
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
