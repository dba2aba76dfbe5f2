package guardrails

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-ai/switchboard/runtime"
)

// Outcomes of a check, as switchboard_guardrail_checks_total counts them.
const (
	OutcomePassed  = "passed"
	OutcomeTripped = "tripped"
	OutcomeFailed  = "failed"
)

// failedReason is the reason of a trip by a judge that failed; the error
// itself (which may name a URL) goes to the logs and the span only.
const failedReason = "the guardrail could not check the text"

// Trip is what metadata.guardrail of a stopped run's reply says.
type Trip struct {
	Name   string `json:"name"`
	Stage  string `json:"stage"`
	Reason string `json:"reason"`
}

// MetadataKey is the key of the Trip in the runtime.Halt's Metadata.
const MetadataKey = "guardrail"

// check judges one text, traced and counted, and returns the *runtime.Halt
// of a trip, nil when the text passed, or the run's error when the judge's
// model call could not start because the run's token budget is spent: the
// run ends with 422 budget_exceeded, as any run that needs a model call
// past its budget (CONTRACT §8), not with a trip.
func (ic *Interceptor) check(ctx context.Context, c *Check) error {
	g := c.Guardrail
	ctx, span := ic.tracer.Start(ctx, "guardrail "+g.Name, trace.WithAttributes(
		attribute.String("switchboard.guardrail.stage", c.Stage),
	))
	defer span.End()
	v, err := ic.judge.Judge(ctx, c)
	outcome := OutcomePassed
	switch {
	case errors.Is(err, runtime.ErrBudgetExceeded):
		span.RecordError(err)
		span.SetStatus(codes.Error, "token budget spent")
		if ic.metrics != nil {
			ic.metrics.GuardrailCheck(g.Name, c.Stage, OutcomeFailed)
		}
		return err
	case err != nil:
		outcome = OutcomeFailed
		span.RecordError(err)
		span.SetStatus(codes.Error, "judge failed")
		ic.log.Warn("guardrail judge failed", "guardrail", g.Name, "stage", c.Stage, "fail_open", g.FailOpen, "err", err)
		v = Verdict{Tripwire: !g.FailOpen}
		if v.Tripwire {
			v.Reason = failedReason
		}
	case v.Tripwire:
		outcome = OutcomeTripped
	}
	span.SetAttributes(attribute.Bool("switchboard.guardrail.tripped", v.Tripwire), attribute.String("switchboard.guardrail.reason", v.Reason))
	if ic.metrics != nil {
		ic.metrics.GuardrailCheck(g.Name, c.Stage, outcome)
	}
	if !v.Tripwire {
		return nil
	}
	return &runtime.Halt{
		FinishReason: FinishReason,
		Content:      g.Message,
		Metadata:     map[string]any{MetadataKey: Trip{Name: g.Name, Stage: c.Stage, Reason: v.Reason}},
	}
}
