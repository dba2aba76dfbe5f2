package runtime_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/switchboard-ai/switchboard/cache"
	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/runtime"
)

// instantModel answers every call at once, so that a run's own cost is
// what is measured.
type instantModel struct{}

func (instantModel) Chat(context.Context, *runtime.ChatRequest, func(string)) (*runtime.ChatResponse, error) {
	return &runtime.ChatResponse{Message: runtime.Message{Role: runtime.RoleAssistant, Content: "Hello! How can I help you today?"}, FinishReason: "stop"}, nil
}

// BenchmarkRunSessionTurn runs one turn of an in-memory session that holds
// `turns` turns already: the run's own cost (load, transcript, save),
// without a provider. A long session should cost about what a short one
// does.
func BenchmarkRunSessionTurn(b *testing.B) {
	cfg, err := graphs.Parse([]byte(`
providers: {fake: {base_url: "http://127.0.0.1:1/v1"}}
agents: {assistant: {instructions: You are a helpful assistant., model: fake/m}}
graphs: {plain: {lead: assistant}}
`), nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, turns := range []int{1, 200} {
		b.Run(fmt.Sprintf("turn=%d", turns+1), func(b *testing.B) {
			store := cache.NewMemory(cache.Options{})
			defer store.Close()
			r := runtime.New(runtime.Options{Model: instantModel{}, Store: store})
			req := func(t int) *runtime.Request {
				return &runtime.Request{Graph: cfg.Graphs["plain"], SessionID: "s",
					Messages: []runtime.Message{{Role: runtime.RoleUser, Content: fmt.Sprintf("turn %d: hello there", t)}}}
			}
			for t := 1; t <= turns; t++ {
				if _, err := r.Run(b.Context(), req(t), nil); err != nil {
					b.Fatal(err)
				}
			}
			// Each iteration adds a turn: reset the session every 20 so
			// that its length stays about `turns`.
			msgs := []runtime.Message{}
			sess, err := store.Load(b.Context(), runtime.SessionKey{ID: "s"})
			if err != nil {
				b.Fatal(err)
			}
			msgs = append(msgs, sess.Messages...)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if i%20 == 19 {
					b.StopTimer()
					_ = store.Delete(b.Context(), runtime.SessionKey{ID: "s"})
					_, lease, _ := store.Acquire(b.Context(), runtime.SessionKey{ID: "s"})
					_, _ = store.Save(b.Context(), runtime.SessionKey{ID: "s"}, lease, runtime.Write{ActiveAgent: "assistant", Messages: msgs})
					_ = store.Release(b.Context(), runtime.SessionKey{ID: "s"}, lease)
					b.StartTimer()
				}
				i++
				if _, err := r.Run(b.Context(), req(i), nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
