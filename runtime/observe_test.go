package runtime_test

import (
	"testing"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/runtime"
)

// disguisedNoop records nothing, as the no-op provider does, but is not
// recognised as it: the observer starts its spans.
type disguisedNoop struct{ noop.TracerProvider }

// With no exporter the gateway runs on the no-op provider, and the
// observer starts no span at all: a run allocates fewer objects than the
// same run with a provider that also records nothing but is not known to.
func TestQuietTracingStartsNoSpan(t *testing.T) {
	cfg, err := graphs.Parse([]byte(`
providers: {fake: {base_url: "http://127.0.0.1:1/v1"}}
agents:
  a: {instructions: I answer., model: fake/m}
graphs: {g: {lead: a}}
`), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	allocs := func(tp trace.TracerProvider) float64 {
		model := &scriptModel{}
		r := runtime.New(runtime.Options{Model: model, TracerProvider: tp})
		req := &runtime.Request{Graph: cfg.Graphs["g"], Messages: []runtime.Message{{Role: runtime.RoleUser, Content: "hi"}}}
		return testing.AllocsPerRun(50, func() {
			model.calls = nil
			if _, err := r.Run(t.Context(), req, nil); err != nil {
				t.Fatal(err)
			}
		})
	}
	quiet, started := allocs(noop.NewTracerProvider()), allocs(disguisedNoop{})
	t.Logf("%.0f allocations quiet, %.0f with spans started", quiet, started)
	// Two spans (invoke_agent, chat), each a name, an options slice and
	// a context.
	if quiet > started-4 {
		t.Fatalf("a run allocates %.0f objects on the no-op provider and %.0f when its spans are started: want at least 4 fewer", quiet, started)
	}
}
