package providers

import (
	"fmt"
	"testing"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
)

func TestTraceContextPropagation(t *testing.T) {
	tests := []struct {
		name        string
		traceHTTP   bool // Options.TracerProvider set: an HTTP client span per attempt
		wantParents int  // "POST" spans recorded
	}{
		{name: "active span is the parent", traceHTTP: false, wantParents: 0},
		{name: "HTTP attempt span is the parent", traceHTTP: true, wantParents: 2},
	}
	for _, tc := range tests {
		for _, stream := range []bool{false, true} { // a stream is sent by call.openStream
			t.Run(fmt.Sprintf("%s/stream=%v", tc.name, stream), func(t *testing.T) {
				rec := tracetest.NewSpanRecorder()
				tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
				defer func() { _ = tp.Shutdown(t.Context()) }()

				s := fakeupstream.New(t, fakeupstream.Reply{Status: 500}, fakeupstream.Reply{Text: "ok"})
				opts := fastOptions()
				if tc.traceHTTP {
					opts.TracerProvider = tp
				}
				r := newTestRegistry(t, s, opts, nil)
				ctx, span := tp.Tracer("test").Start(t.Context(), "chat gpt-test")
				_, err := r.Chat(ctx, userRequest("hi", stream), nil)
				span.End()
				if err != nil {
					t.Fatal(err)
				}

				var posts []trace.SpanContext
				for _, s := range rec.Ended() {
					if s.Name() == "POST" {
						posts = append(posts, s.SpanContext())
						if s.Parent().SpanID() != span.SpanContext().SpanID() || s.SpanKind() != trace.SpanKindClient {
							t.Errorf("POST span parent %s kind %s", s.Parent().SpanID(), s.SpanKind())
						}
					}
				}
				if len(posts) != tc.wantParents {
					t.Fatalf("got %d POST spans, want %d", len(posts), tc.wantParents)
				}
				for i, req := range s.Requests() {
					tp := req.Header.Get("Traceparent")
					wantParent := span.SpanContext().SpanID()
					if tc.traceHTTP {
						wantParent = posts[i].SpanID()
					}
					want := "00-" + span.SpanContext().TraceID().String() + "-" + wantParent.String() + "-01"
					if tp != want {
						t.Errorf("request %d traceparent = %q, want %q", i, tp, want)
					}
				}
			})
		}
	}
}

func TestNoTraceparentWithoutSpan(t *testing.T) {
	for _, stream := range []bool{false, true} {
		s := fakeupstream.New(t, fakeupstream.Reply{Text: "ok"})
		r := newTestRegistry(t, s, fastOptions(), nil)
		if _, err := r.Chat(t.Context(), userRequest("hi", stream), nil); err != nil {
			t.Fatal(err)
		}
		if tp := s.Requests()[0].Header.Get("Traceparent"); tp != "" {
			t.Errorf("stream=%v: traceparent %q sent with no active span", stream, tp)
		}
	}
}

// Baggage alone, with no span, still reaches the provider: the propagator
// is skipped only when the context holds neither.
func TestBaggageWithoutSpanPropagates(t *testing.T) {
	s := fakeupstream.New(t, fakeupstream.Reply{Text: "ok"}, fakeupstream.Reply{Text: "ok"})
	opts := fastOptions()
	opts.Propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	r := newTestRegistry(t, s, opts, nil)
	m, err := baggage.NewMember("tenant", "acme")
	if err != nil {
		t.Fatal(err)
	}
	b, err := baggage.New(m)
	if err != nil {
		t.Fatal(err)
	}
	for i, stream := range []bool{false, true} {
		if _, err := r.Chat(baggage.ContextWithBaggage(t.Context(), b), userRequest("hi", stream), nil); err != nil {
			t.Fatal(err)
		}
		h := s.Requests()[i].Header
		if got := h.Get("Baggage"); got != "tenant=acme" {
			t.Errorf("stream=%v: baggage %q, want tenant=acme", stream, got)
		}
		if tp := h.Get("Traceparent"); tp != "" {
			t.Errorf("stream=%v: traceparent %q sent with no span", stream, tp)
		}
	}
}

// The no-op provider (tracing off) gets no HTTP spans started: each
// allocated its options, its context and a copy of the request for
// nothing. A provider that records is still used.
func TestNoopProviderStartsNoHTTPSpan(t *testing.T) {
	s := fakeupstream.New(t, fakeupstream.Reply{Text: "ok"})
	for _, tc := range []struct {
		tp    trace.TracerProvider
		spans bool
	}{
		{noop.NewTracerProvider(), false},
		{sdktrace.NewTracerProvider(), true},
	} {
		opts := fastOptions()
		opts.TracerProvider = tc.tp
		r := newTestRegistry(t, s, opts, nil)
		if got := r.upstreams[0].tracer != nil; got != tc.spans {
			t.Errorf("%T: HTTP spans %v, want %v", tc.tp, got, tc.spans)
		}
	}
}
