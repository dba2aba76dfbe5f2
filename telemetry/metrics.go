package telemetry

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/switchboard-ai/switchboard/runtime"
)

// Bucket boundaries, in seconds. Whole requests and provider calls range
// from a cached few milliseconds to minutes of generation; the gateway's
// own overhead should sit well under a millisecond, so its buckets start
// at 50µs.
var (
	latencyBuckets  = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}
	overheadBuckets = []float64{50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 1}
	toolBuckets     = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
)

// Metrics holds Switchboard's Prometheus metrics. It implements
// runtime.Metrics for the run loop and has the methods the gateway calls per
// request. Label values must come from the configuration (graph, agent,
// provider, model and tool names) or from a fixed set (status, outcome),
// never from raw client input, so that the series stay bounded.
type Metrics struct {
	requests         *prometheus.CounterVec
	requestDuration  *prometheus.HistogramVec
	overhead         *prometheus.HistogramVec
	inflight         prometheus.Gauge
	handoffs         *prometheus.CounterVec
	providerDuration *prometheus.HistogramVec
	providerErrors   *prometheus.CounterVec
	tokens           *prometheus.CounterVec
	toolCalls        *prometheus.CounterVec
	toolDuration     *prometheus.HistogramVec
	permissions      *prometheus.CounterVec

	// The caches hold the children of the vectors per label set, so that
	// recording skips the vectors' label hashing and locking.
	requestObs  labelCache[requestKey, requestObservers]
	graphObs    labelCache[string, prometheus.Observer]
	handoffObs  labelCache[[4]string, prometheus.Counter]
	providerObs labelCache[[2]string, providerObservers]
	toolObs     labelCache[string, toolObservers]
	permObs     labelCache[[3]string, prometheus.Counter]
}

var _ runtime.Metrics = (*Metrics)(nil)

type requestKey struct {
	graph, code string
	status      int
}

type requestObservers struct {
	count    prometheus.Counter
	duration prometheus.Observer
}

type providerObservers struct {
	duration      prometheus.Observer
	errors        prometheus.Counter
	input, output prometheus.Counter
}

type toolObservers struct {
	ok, failed prometheus.Counter
	duration   prometheus.Observer
}

// NewMetrics creates the metrics and registers them with reg (which must not
// hold them already). A nil reg records without exposing, for tests and
// tools that do not serve /metrics.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_requests_total",
			Help: "Requests answered, by graph, HTTP status and error code (empty on success).",
		}, []string{"graph", "status", "code"}),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "switchboard_request_duration_seconds",
			Help:    "Time from a request's arrival to the end of its reply, by graph.",
			Buckets: latencyBuckets,
		}, []string{"graph"}),
		overhead: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "switchboard_overhead_seconds",
			Help:    "Time a request spent in the gateway itself: its duration minus the time spent waiting on providers and tools.",
			Buckets: overheadBuckets,
		}, []string{"graph"}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchboard_runs_in_flight",
			Help: "Runs in progress.",
		}),
		handoffs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_handoffs_total",
			Help: "Handoff calls, by graph, source agent, target agent and outcome.",
		}, []string{"graph", "from", "to", "outcome"}),
		providerDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "switchboard_provider_request_duration_seconds",
			Help:    "Duration of provider calls, failed ones included.",
			Buckets: latencyBuckets,
		}, []string{"provider", "model"}),
		providerErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_provider_errors_total",
			Help: "Provider calls that failed.",
		}, []string{"provider", "model"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_tokens_total",
			Help: "Tokens reported by providers, by type (input or output).",
		}, []string{"provider", "model", "type"}),
		toolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_tool_calls_total",
			Help: "Server-side tool calls, by outcome (ok or error).",
		}, []string{"tool", "outcome"}),
		toolDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "switchboard_tool_duration_seconds",
			Help:    "Duration of server-side tool calls.",
			Buckets: toolBuckets,
		}, []string{"tool"}),
		permissions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_permission_decisions_total",
			Help: "Decisions of the permission gate, by graph, tool and decision (allowed, denied, pending, approved, rejected, expired).",
		}, []string{"graph", "tool", "decision"}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.requestDuration, m.overhead, m.inflight, m.handoffs,
			m.providerDuration, m.providerErrors, m.tokens, m.toolCalls, m.toolDuration, m.permissions)
	}
	return m
}

// Request records one answered request: graph is the graph it ran (empty
// when it named none the gateway knows), code the error code of a failed
// request (empty on success), status the HTTP status sent.
func (m *Metrics) Request(graph, code string, status int, seconds float64) {
	obs := m.requestObs.get(requestKey{graph, code, status}, func() requestObservers {
		return requestObservers{
			count:    m.requests.WithLabelValues(graph, strconv.Itoa(status), code),
			duration: m.requestDuration.WithLabelValues(graph),
		}
	})
	obs.count.Inc()
	obs.duration.Observe(seconds)
}

// Overhead records the time a request spent in the gateway itself.
func (m *Metrics) Overhead(graph string, seconds float64) {
	m.graphObs.get(graph, func() prometheus.Observer {
		return m.overhead.WithLabelValues(graph)
	}).Observe(seconds)
}

// Inflight adds delta (1 when a run starts, -1 when it ends) to the runs in
// progress.
func (m *Metrics) Inflight(delta int) {
	m.inflight.Add(float64(delta))
}

// Handoff counts one handoff call by its outcome.
func (m *Metrics) Handoff(graph, from, to, outcome string) {
	m.handoffObs.get([4]string{graph, from, to, outcome}, func() prometheus.Counter {
		return m.handoffs.WithLabelValues(graph, from, to, outcome)
	}).Inc()
}

// ModelCall records one provider call: its latency, its tokens and whether
// it failed.
func (m *Metrics) ModelCall(provider, model string, seconds float64, usage runtime.Usage, failed bool) {
	obs := m.providerObs.get([2]string{provider, model}, func() providerObservers {
		return providerObservers{
			duration: m.providerDuration.WithLabelValues(provider, model),
			errors:   m.providerErrors.WithLabelValues(provider, model),
			input:    m.tokens.WithLabelValues(provider, model, "input"),
			output:   m.tokens.WithLabelValues(provider, model, "output"),
		}
	})
	obs.duration.Observe(seconds)
	if failed {
		obs.errors.Inc()
	}
	if usage.PromptTokens > 0 {
		obs.input.Add(float64(usage.PromptTokens))
	}
	if usage.CompletionTokens > 0 {
		obs.output.Add(float64(usage.CompletionTokens))
	}
}

// ToolCall records one server-side tool call.
func (m *Metrics) ToolCall(tool string, seconds float64, failed bool) {
	obs := m.toolObs.get(tool, func() toolObservers {
		return toolObservers{
			ok:       m.toolCalls.WithLabelValues(tool, "ok"),
			failed:   m.toolCalls.WithLabelValues(tool, "error"),
			duration: m.toolDuration.WithLabelValues(tool),
		}
	})
	obs.duration.Observe(seconds)
	if failed {
		obs.failed.Inc()
	} else {
		obs.ok.Inc()
	}
}

// PermissionDecision counts one decision of the permission gate. A pending
// call is counted pending when its run pauses, then once more when its
// decision takes effect (approved, rejected or expired).
func (m *Metrics) PermissionDecision(graph, tool, decision string) {
	m.permObs.get([3]string{graph, tool, decision}, func() prometheus.Counter {
		return m.permissions.WithLabelValues(graph, tool, decision)
	}).Inc()
}

// Handler serves the metrics gathered by g in the Prometheus text format.
func Handler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{})
}
