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
		{"a length that is not a number", func(ctx context.Context, s *Redis, k sessionKeys) error {
			return s.client.HSet(ctx, k.meta, "len", "abc").Err()
		}, "its length is not a number"},
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

// A save that finds its session's length or size damaged writes nothing
// and reports the session corrupt. Read as a list that disagrees with its
// length, a damaged length used to start the list anew: the next turn
// deleted the session's history.
func TestRedisSaveKeepsDamagedSession(t *testing.T) {
	for field, reason := range map[string]string{"len": "its length is not a number", "bytes": "its size in bytes is not a number"} {
		t.Run(field, func(t *testing.T) {
			ctx := context.Background()
			s := openRedis(t, Options{CacheEntries: -1})
			k := testKey(t, s)
			keys := keysFor(k)
			t.Cleanup(func() { s.client.Del(ctx, keys.lock) })
			if _, err := turn(t, s, k, runtime.Write{Messages: []runtime.Message{{Role: "user", Content: "hi"}, {Role: "assistant", Content: "hello"}}, ActiveAgent: "a"}); err != nil {
				t.Fatal(err)
			}
			_, lease, err := s.Acquire(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.client.HSet(ctx, keys.meta, field, "lots").Err(); err != nil {
				t.Fatal(err)
			}
			_, err = s.Save(ctx, k, lease, runtime.Write{Messages: []runtime.Message{{Role: "user", Content: "again"}}, ActiveAgent: "a"})
			var ce *runtime.SessionCorruptError
			if !errors.As(err, &ce) || ce.ID != k.ID || !strings.Contains(ce.Reason, reason) {
				t.Fatalf("Save: %v, want the session corrupt: %s", err, reason)
			}
			if n, err := s.client.LLen(ctx, keys.msgs).Result(); err != nil || n != 2 {
				t.Errorf("the list holds %d messages (%v), want the 2 it had", n, err)
			}
		})
	}
}
