package runtime_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/runtime"
)

// pausingModel streams its script: a word is a delta, "|" a pause (the
// model is about to wait for more). It takes the pauser when take is set,
// and records whether it was offered one.
type pausingModel struct {
	script  string
	take    bool
	offered []bool
}

func (m *pausingModel) Chat(ctx context.Context, _ *runtime.ChatRequest, onDelta func(string)) (*runtime.ChatResponse, error) {
	var pause runtime.Pauser
	if m.take {
		pause = runtime.StreamPauser(ctx)
		m.offered = append(m.offered, pause != nil)
	}
	var text strings.Builder
	for _, w := range strings.Fields(m.script) {
		if w == "|" {
			if pause != nil {
				pause.Pause()
			}
			continue
		}
		text.WriteString(w)
		if onDelta != nil {
			onDelta(w)
		}
	}
	return &runtime.ChatResponse{Message: runtime.Message{Role: runtime.RoleAssistant, Content: text.String()}, FinishReason: "stop"}, nil
}

// pauseEvents renders the events of a run: d(word) for a delta, b(word)
// for a batched one, F for EventFlush.
func pauseEvents(t *testing.T, model runtime.Model, stream bool, ics ...runtime.Interceptor) []string {
	t.Helper()
	cfg, err := graphs.Parse([]byte(`
providers: {fake: {base_url: "http://127.0.0.1:1/v1"}}
agents: {solo: {description: Solo., instructions: I answer., model: fake/m}}
graphs: {g: {lead: solo}}
`), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := runtime.New(runtime.Options{Model: model, Interceptors: ics})
	var got []string
	_, err = r.Run(t.Context(), &runtime.Request{Graph: cfg.Graphs["g"], Stream: stream,
		Messages: []runtime.Message{{Role: runtime.RoleUser, Content: "hi"}}}, func(ev runtime.Event) {
		switch {
		case ev.Kind == runtime.EventDelta && ev.Batched:
			got = append(got, fmt.Sprintf("b(%s)", ev.Text))
		case ev.Kind == runtime.EventDelta:
			got = append(got, fmt.Sprintf("d(%s)", ev.Text))
		case ev.Kind == runtime.EventFlush:
			got = append(got, "F")
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// A model that takes the pauser has its deltas batched, and each pause
// after a delta is an EventFlush: one for every run of deltas, none for a
// pause with nothing held. What its call ends with is flushed whether or
// not it paused. A model that does not take it has each delta sent alone,
// and a run that does not stream offers none.
func TestStreamPauserBatchesDeltas(t *testing.T) {
	for _, tc := range []struct {
		name   string
		model  *pausingModel
		stream bool
		want   []string
	}{
		{"pauses", &pausingModel{script: "| a b | | c |", take: true}, true,
			[]string{"b(a)", "b(b)", "F", "b(c)", "F"}},
		{"ends without a pause", &pausingModel{script: "a | b c", take: true}, true,
			[]string{"b(a)", "F", "b(b)", "b(c)", "F"}},
		{"not taken", &pausingModel{script: "a b | c"}, true,
			[]string{"d(a)", "d(b)", "d(c)"}},
		{"not a stream", &pausingModel{script: "a | b", take: true}, false,
			[]string{"d(ab)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := pauseEvents(t, tc.model, tc.stream); !slices.Equal(got, tc.want) {
				t.Errorf("events %v, want %v", got, tc.want)
			}
			if tc.model.take && (len(tc.model.offered) != 1 || tc.model.offered[0] != tc.stream) {
				t.Errorf("pauser offered %v, want [%v]", tc.model.offered, tc.stream)
			}
		})
	}
}

// holdAll holds a call's deltas until the call returned, as an agent's
// output guardrails do, then sends them as one.
type holdAll struct{ runtime.BaseInterceptor }

func (holdAll) InterceptModel(next runtime.ModelFunc) runtime.ModelFunc {
	return func(ctx context.Context, call *runtime.ModelCall) (*runtime.ChatResponse, error) {
		out := call.OnDelta
		var held strings.Builder
		call.OnDelta = func(s string) { held.WriteString(s) }
		defer func() { call.OnDelta = out }()
		resp, err := next(ctx, call)
		if err == nil && held.Len() > 0 {
			out(held.String())
		}
		return resp, err
	}
}

// Deltas an interceptor sends once the model returned, after the model's
// last pause, are flushed when the call ends: nothing batched is left
// waiting for a pause that will not come.
func TestStreamPauserFlushesWhatAnInterceptorReleases(t *testing.T) {
	got := pauseEvents(t, &pausingModel{script: "a | b |", take: true}, true, holdAll{})
	if want := []string{"b(ab)", "F"}; !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
}
