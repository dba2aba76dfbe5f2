package main

import (
	"context"
	"fmt"
	goruntime "runtime"
	"strings"

	"github.com/switchboard-ai/switchboard/cache"
	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/runtime"
)

// idleConfig is one agent on a provider that is never called (idleModel
// answers instead).
const idleConfig = `
providers: {fake: {base_url: "http://127.0.0.1:1/v1"}}
agents: {assistant: {instructions: You are a helpful assistant., model: fake/m}}
graphs: {plain: {lead: assistant}}
`

// idleModel answers each turn with a text of its own, about as long as the
// user's.
type idleModel struct{}

func (idleModel) Chat(_ context.Context, req *runtime.ChatRequest, _ func(string)) (*runtime.ChatResponse, error) {
	msgs := req.Messages.Flat()
	last := msgs[len(msgs)-1].Content
	_, id, _ := strings.Cut(last, " of ")
	return &runtime.ChatResponse{Message: runtime.Message{Role: runtime.RoleAssistant,
		Content: "Hello " + id[:8] + "! How can I help you today?"}, FinishReason: "stop"}, nil
}

// idleSessionBytes is the heap an idle in-memory session holds: n sessions
// of two turns (a user message and the answer each, ~40 bytes of text
// apiece) are run through a runtime.Runner on a cache.Memory, the store the gateway
// uses for memory://, and the live heap is compared before and after. It
// counts the store's session and the Runner's per-session prompt cache
// entry (kept for up to 4096 sessions; n should not be larger).
func idleSessionBytes(ctx context.Context, n int) (float64, error) {
	cfg, err := graphs.Parse([]byte(idleConfig), nil, nil)
	if err != nil {
		return 0, err
	}
	m := cache.NewMemory(cache.Options{})
	defer m.Close()
	r := runtime.New(runtime.Options{Model: idleModel{}, Store: m})
	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	for i := range n {
		// Two turns: the second is the first to find a history, which the
		// Runner then remembers how to read.
		for turn := 1; turn <= 2; turn++ {
			req := &runtime.Request{Graph: cfg.Graphs["plain"], SessionID: fmt.Sprintf("session-%08d", i),
				Messages: []runtime.Message{{Role: runtime.RoleUser, Content: fmt.Sprintf("Turn %d of %08d: hello, what can you do?", turn, i)}}}
			if _, err := r.Run(ctx, req, nil); err != nil {
				return 0, fmt.Errorf("idle sessions: %w", err)
			}
		}
	}
	goruntime.GC()
	goruntime.ReadMemStats(&after)
	goruntime.KeepAlive(m)
	goruntime.KeepAlive(r)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n), nil
}
