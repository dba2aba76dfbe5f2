package cache

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/switchboard-ai/switchboard/runtime"
)

// A session whose records in Redis cannot be decoded is reported as
// corrupt, naming the session, and never as the store being unreachable:
// a 503 told clients to retry a session that would never load (issue 23).
func TestRedisCorruptSession(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(ctx context.Context, s *Redis, k sessionKeys) error
		reason string
	}{
		{"a non-numeric version", func(ctx context.Context, s *Redis, k sessionKeys) error {
			return s.client.HSet(ctx, k.meta, "version", "seven").Err()
		}, `version "seven" is not a number`},
		{"a message that is not JSON", func(ctx context.Context, s *Redis, k sessionKeys) error {
			return s.client.LSet(ctx, k.msgs, 0, "{not json").Err()
		}, "message 0 is not a JSON message"},
		{"a key of the wrong type", func(ctx context.Context, s *Redis, k sessionKeys) error {
			if err := s.client.Del(ctx, k.msgs).Err(); err != nil {
				return err
			}
			return s.client.Set(ctx, k.msgs, "a string, not a list", 0).Err()
		}, "wrong type"},
		{"a lock of the wrong type", func(ctx context.Context, s *Redis, k sessionKeys) error {
			return s.client.HSet(ctx, k.lock, "x", "y").Err()
		}, "wrong type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := openRedis(t, Options{CacheEntries: -1})
			k := testKey(t, s)
			t.Cleanup(func() { s.client.Del(ctx, keysFor(k).lock) })
			if _, err := turn(t, s, k, runtime.Write{Messages: []runtime.Message{{Role: "user", Content: "hi"}}, ActiveAgent: "a"}); err != nil {
				t.Fatal(err)
			}
			if err := tc.damage(ctx, s, keysFor(k)); err != nil {
				t.Fatal(err)
			}
			_, loadErr := s.Load(ctx, k)
			_, _, acqErr := s.Acquire(ctx, k)
			for op, err := range map[string]error{"Load": loadErr, "Acquire": acqErr} {
				if op == "Load" && strings.HasPrefix(tc.name, "a lock") {
					continue // Load never reads the lock
				}
				var ce *runtime.SessionCorruptError
				if !errors.As(err, &ce) || !errors.Is(err, runtime.ErrSessionCorrupt) || errors.Is(err, runtime.ErrStoreUnavailable) {
					t.Errorf("%s: %v, want a SessionCorruptError and not ErrStoreUnavailable", op, err)
					continue
				}
				if ce.ID != k.ID || !strings.Contains(ce.Reason, tc.reason) {
					t.Errorf("%s: %q for session %q, want %q", op, ce.Reason, ce.ID, tc.reason)
				}
			}
		})
	}
}
