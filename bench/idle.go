package main

import (
	"context"
	"fmt"
	goruntime "runtime"

	"github.com/switchboard-ai/switchboard/cache"
	"github.com/switchboard-ai/switchboard/runtime"
)

// idleSessionBytes is the heap an idle in-memory session holds: n sessions
// of one turn (a user message and the answer, each ~40 bytes of text) are
// saved into a cache.Memory, the same store the gateway uses for
// memory://, and the live heap is compared before and after.
func idleSessionBytes(ctx context.Context, n int) (float64, error) {
	m := cache.NewMemory(cache.Options{})
	defer m.Close()
	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	for i := range n {
		key := runtime.SessionKey{ID: fmt.Sprintf("session-%08d", i)}
		_, lease, err := m.Acquire(ctx, key)
		if err != nil {
			return 0, fmt.Errorf("idle sessions: %w", err)
		}
		w := runtime.Write{ActiveAgent: "assistant", Messages: []runtime.Message{
			{Role: runtime.RoleUser, Content: fmt.Sprintf("Turn 1 of %08d: hello, what can you do?", i)},
			{Role: runtime.RoleAssistant, Content: fmt.Sprintf("Hello %08d! How can I help you today?", i)},
		}}
		if _, err := m.Save(ctx, key, lease, w); err != nil {
			return 0, fmt.Errorf("idle sessions: %w", err)
		}
		if err := m.Release(ctx, key, lease); err != nil {
			return 0, fmt.Errorf("idle sessions: %w", err)
		}
	}
	goruntime.GC()
	goruntime.ReadMemStats(&after)
	goruntime.KeepAlive(m)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n), nil
}
