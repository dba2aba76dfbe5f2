package telemetry

import "github.com/prometheus/client_golang/prometheus"

// Reloads counts config reloads (SIGHUP or serve --watch) by result.
type Reloads struct {
	ok, failed prometheus.Counter
}

// NewReloads creates switchboard_config_reloads_total{result="ok"|"failed"}
// and registers it with reg; nil reg counts without exposing. Both series
// exist from the start, at 0, so that an alert on failures sees the first.
func NewReloads(reg prometheus.Registerer) *Reloads {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchboard_config_reloads_total",
		Help: "Config reloads, by result: ok (the new config serves) or failed (the old one stays).",
	}, []string{"result"})
	if reg != nil {
		reg.MustRegister(v)
	}
	return &Reloads{ok: v.WithLabelValues("ok"), failed: v.WithLabelValues("failed")}
}

// Count records one reload.
func (r *Reloads) Count(ok bool) {
	if ok {
		r.ok.Inc()
		return
	}
	r.failed.Inc()
}
