package telemetry

import "github.com/prometheus/client_golang/prometheus"

// GuardrailMetrics counts guardrail checks (README, Guardrails); it satisfies
// guardrails.Metrics.
type GuardrailMetrics struct {
	checks *prometheus.CounterVec
}

// NewGuardrailMetrics creates the guardrail metrics and registers them with
// reg; a nil reg records without exposing.
func NewGuardrailMetrics(reg prometheus.Registerer) *GuardrailMetrics {
	m := &GuardrailMetrics{checks: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchboard_guardrail_checks_total",
		Help: "Guardrail checks, by guardrail, stage (input, output) and outcome (passed, tripped, failed: the judge errored).",
	}, []string{"guardrail", "stage", "outcome"})}
	if reg != nil {
		reg.MustRegister(m.checks)
	}
	return m
}

// GuardrailCheck counts one check.
func (m *GuardrailMetrics) GuardrailCheck(guardrail, stage, outcome string) {
	m.checks.WithLabelValues(guardrail, stage, outcome).Inc()
}
