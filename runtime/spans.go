package runtime

import (
	"context"
	"encoding/json"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-ai/switchboard/graphs"
)

// Span attribute keys (OpenTelemetry GenAI conventions and our own).
const (
	attrOperation     = attribute.Key("gen_ai.operation.name")
	attrAgentName     = attribute.Key("gen_ai.agent.name")
	attrConversation  = attribute.Key("gen_ai.conversation.id")
	attrProvider      = attribute.Key("gen_ai.provider.name")
	attrRequestModel  = attribute.Key("gen_ai.request.model")
	attrResponseID    = attribute.Key("gen_ai.response.id")
	attrInputTokens   = attribute.Key("gen_ai.usage.input_tokens")
	attrOutputTokens  = attribute.Key("gen_ai.usage.output_tokens")
	attrFinishReasons = attribute.Key("gen_ai.response.finish_reasons")
	attrInputMsgs     = attribute.Key("gen_ai.input.messages")
	attrOutputMsgs    = attribute.Key("gen_ai.output.messages")
	attrToolName      = attribute.Key("gen_ai.tool.name")
	attrToolCallID    = attribute.Key("gen_ai.tool.call.id")
	attrHandoffFrom   = attribute.Key("switchboard.handoff.from")
	attrHandoffTo     = attribute.Key("switchboard.handoff.to")
	attrHandoffTool   = attribute.Key("switchboard.handoff.tool_name")
	attrHandoffCallID = attribute.Key("switchboard.handoff.tool_call_id")
	attrHandoffOut    = attribute.Key("switchboard.handoff.outcome")
	attrGraph         = attribute.Key("switchboard.graph")
)

// startAgent opens the invoke_agent span of an agent taking the run; the
// agent's model, tool and handoff spans are its children.
func (rn *run) startAgent(ctx context.Context, a *graphs.Agent) {
	ctx, span := rn.tracer.Start(ctx, "invoke_agent "+a.Name, trace.WithSpanKind(trace.SpanKindInternal))
	if span.IsRecording() {
		span.SetAttributes(
			attrOperation.String("invoke_agent"),
			attrAgentName.String(a.Name),
			attrConversation.String(rn.req.SessionID),
			attrGraph.String(rn.graph.Name),
		)
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
			attrOperation.String("chat"),
			attrProvider.String(req.Model.Provider),
			attrRequestModel.String(req.Model.Model),
			attrAgentName.String(rn.agent.Name),
		)
		if rn.opts.CaptureContent {
			if b, err := json.Marshal(req.Messages); err == nil {
				span.SetAttributes(attrInputMsgs.String(string(b)))
			}
		}
	}
	return ctx, span
}

// endChatSpan records a provider call's answer and closes its span.
func (rn *run) endChatSpan(span trace.Span, resp *ChatResponse) {
	if span.IsRecording() {
		span.SetAttributes(
			attrInputTokens.Int(resp.Usage.PromptTokens),
			attrOutputTokens.Int(resp.Usage.CompletionTokens),
			attrFinishReasons.StringSlice([]string{resp.FinishReason}),
		)
		if resp.ID != "" {
			span.SetAttributes(attrResponseID.String(resp.ID))
		}
		if rn.opts.CaptureContent {
			if b, err := json.Marshal([]Message{resp.Message}); err == nil {
				span.SetAttributes(attrOutputMsgs.String(string(b)))
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
			attrOperation.String("execute_tool"),
			attrToolName.String(tool),
			attrToolCallID.String(callID),
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
			attrHandoffFrom.String(from),
			attrHandoffTo.String(to),
			attrHandoffTool.String(h.ToolName),
			attrHandoffCallID.String(callID),
			attrHandoffOut.String(outcome),
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
