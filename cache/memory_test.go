package cache

import (
	"sync"
	"testing"
	"time"

	"github.com/switchboard-ai/switchboard/cache/storetest"
	"github.com/switchboard-ai/switchboard/runtime"
)

func TestMemory(t *testing.T) {
	// Two gateways on a memory store are one process: every store a test
	// opens is the same one.
	var mu sync.Mutex
	stores := map[*testing.T]*Memory{}
	storetest.Run(t, func(t *testing.T, cfg storetest.Config) runtime.Store {
		mu.Lock()
		defer mu.Unlock()
		if s, ok := stores[t]; ok {
			return s
		}
		s := NewMemory(Options{SessionTTL: cfg.SessionTTL, LockLease: cfg.LockLease, MaxSessionBytes: cfg.MaxSessionBytes})
		t.Cleanup(func() { _ = s.Close() })
		stores[t] = s
		return s
	})
}

func TestMemorySweepsExpiredSessions(t *testing.T) {
	ttl := 50 * time.Millisecond
	s := NewMemory(Options{SessionTTL: ttl, LockLease: ttl})
	defer s.Close()
	for _, id := range []string{"written", "locked"} {
		k := runtime.SessionKey{Principal: "p", ID: id}
		_, lease, err := s.Acquire(t.Context(), k)
		if err != nil {
			t.Fatalf("Acquire: %v", err)
		}
		if id == "written" {
			if _, err := s.Save(t.Context(), k, lease, runtime.Write{Messages: []runtime.Message{{Role: "user", Content: "hi"}}}); err != nil {
				t.Fatalf("Save: %v", err)
			}
		}
	}
	// Nobody touches the sessions again: only the sweeper can drop them.
	deadline := time.Now().Add(5 * time.Second)
	for {
		s.mu.Lock()
		n := len(s.sessions)
		s.mu.Unlock()
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions left long after their TTL and lease", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
