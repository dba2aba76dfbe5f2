package cache

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/switchboard-ai/switchboard/cache/storetest"
	"github.com/switchboard-ai/switchboard/runtime"
)

// testRedisURL returns the Redis the tests use (SWITCHBOARD_TEST_REDIS_URL,
// default 127.0.0.1:6379). When it does not answer, the test is skipped, or
// fails when CI=true.
func testRedisURL(tb testing.TB) string {
	tb.Helper()
	u := os.Getenv("SWITCHBOARD_TEST_REDIS_URL")
	if u == "" {
		u = "redis://127.0.0.1:6379/0"
	}
	// Any store URL: the scale script (scripts/redis-scale.sh) points the
	// suite at a Cluster and at Sentinel.
	o, err := universalOptions(u)
	if err != nil {
		tb.Fatalf("SWITCHBOARD_TEST_REDIS_URL: %v", err)
	}
	o.MaxRetries, o.DialerRetries = -1, 1 // a refused connection answers at once
	c := redis.NewUniversalClient(o)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("redis at %s is needed in CI: %v", u, err)
		}
		tb.Skipf("redis at %s does not answer: %v", u, err)
	}
	return u
}

// openRedis opens a Redis store on the test Redis, closed when tb ends.
func openRedis(tb testing.TB, opts Options) *Redis {
	tb.Helper()
	if opts.URL == "" {
		opts.URL = testRedisURL(tb)
	}
	s, err := NewRedis(context.Background(), opts)
	if err != nil {
		tb.Fatalf("NewRedis: %v", err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// testKey returns a session key no other test uses and deletes it from s
// when tb ends.
func testKey(tb testing.TB, s runtime.Store) runtime.SessionKey {
	k := runtime.SessionKey{Principal: "cache-test-" + rand.Text(), ID: "session"}
	tb.Cleanup(func() {
		if err := s.Delete(context.Background(), k); err != nil {
			tb.Errorf("clean up: %v", err)
		}
	})
	return k
}

func TestRedis(t *testing.T) {
	u := testRedisURL(t)
	storetest.Run(t, func(t *testing.T, cfg storetest.Config) runtime.Store {
		return openRedis(t, Options{URL: u, SessionTTL: cfg.SessionTTL, LockLease: cfg.LockLease, MaxSessionBytes: cfg.MaxSessionBytes})
	})
}

func TestRedisWithoutCache(t *testing.T) {
	u := testRedisURL(t)
	storetest.Run(t, func(t *testing.T, cfg storetest.Config) runtime.Store {
		return openRedis(t, Options{URL: u, SessionTTL: cfg.SessionTTL, LockLease: cfg.LockLease, CacheEntries: -1, MaxSessionBytes: cfg.MaxSessionBytes})
	})
}

// turn runs one acquire/save/release turn and returns what Acquire loaded.
func turn(tb testing.TB, s runtime.Store, k runtime.SessionKey, w runtime.Write) (*runtime.Session, error) {
	tb.Helper()
	ctx := context.Background()
	sess, lease, err := s.Acquire(ctx, k)
	if err != nil {
		return nil, err
	}
	defer s.Release(ctx, k, lease)
	if _, err := s.Save(ctx, k, lease, w); err != nil {
		tb.Fatalf("Save: %v", err)
	}
	return sess, nil
}

// TestRedisReadsOnlyNewMessages shows that a store asks Redis only for the
// messages it has not seen: with the first stored message made unreadable,
// the store that cached it still loads the session, while a store without
// that cache cannot.
func TestRedisReadsOnlyNewMessages(t *testing.T) {
	a := openRedis(t, Options{})
	k := testKey(t, a)
	msgs := make([]runtime.Message, 20)
	for i := range msgs {
		msgs[i] = runtime.Message{Role: runtime.RoleUser, Content: strings.Repeat("x", i)}
	}
	if _, err := turn(t, a, k, runtime.Write{Messages: msgs[:10]}); err != nil {
		t.Fatalf("turn: %v", err)
	}
	if err := a.client.LSet(t.Context(), keysFor(k).msgs, 0, "not json").Err(); err != nil {
		t.Fatalf("LSET: %v", err)
	}
	b := openRedis(t, Options{})
	if _, err := turn(t, b, k, runtime.Write{Messages: msgs[10:]}); err == nil {
		t.Fatal("Acquire of a corrupt list by a store without a cache: no error")
	}
	sess, err := turn(t, a, k, runtime.Write{Messages: msgs[10:]})
	if err != nil {
		t.Fatalf("Acquire by the store that cached the session: %v", err)
	}
	if diff := cmp.Diff(msgs[:10], sess.Messages); diff != "" {
		t.Errorf("Acquire mismatch (-want +got):\n%s", diff)
	}
	got, err := a.Load(t.Context(), k)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if diff := cmp.Diff(msgs, got.Messages); diff != "" {
		t.Errorf("Load mismatch (-want +got):\n%s", diff)
	}
}

// TestRedisTracing checks that commands are traced through the provider
// passed in, and that no span carries the transcript.
func TestRedisTracing(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	s := openRedis(t, Options{TracerProvider: tp})
	k := testKey(t, s)
	const secret = "my card number is 4242"
	if _, err := turn(t, s, k, runtime.Write{Messages: []runtime.Message{{Role: runtime.RoleUser, Content: secret}}}); err != nil {
		t.Fatalf("turn: %v", err)
	}
	spans := rec.Ended()
	if len(spans) < 3 {
		t.Fatalf("got %d spans for acquire, save and release, want at least 3", len(spans))
	}
	for _, sp := range spans {
		for _, a := range sp.Attributes() {
			if strings.Contains(a.Value.String(), "4242") {
				t.Errorf("span %q attribute %s holds the transcript: %s", sp.Name(), a.Key, a.Value.String())
			}
		}
	}
}

func TestRedisDeleteReleasesLock(t *testing.T) {
	s := openRedis(t, Options{})
	k := testKey(t, s)
	_, lease, err := s.Acquire(t.Context(), k)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if err := s.Delete(t.Context(), k); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	_, err = s.Save(t.Context(), k, lease, runtime.Write{Messages: []runtime.Message{{Role: "user", Content: "late"}}})
	if !errors.Is(err, runtime.ErrLeaseLost) {
		t.Fatalf("Save after Delete: %v, want ErrLeaseLost", err)
	}
	if _, err := s.Load(t.Context(), k); !errors.Is(err, runtime.ErrNotFound) {
		t.Fatalf("Load after Delete: %v, want ErrNotFound", err)
	}
}

// TestRedisSaveRetryAfterRelease runs one releasing save's script twice, as
// go-redis does when a connection breaks after Redis ran a command: the
// retry must report the write that happened, not a lost lease, and must not
// write it again.
func TestRedisSaveRetryAfterRelease(t *testing.T) {
	s := openRedis(t, Options{})
	k := testKey(t, s)
	_, lease, err := s.Acquire(t.Context(), k)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	msgs := []runtime.Message{{Role: runtime.RoleUser, Content: "hi"}, {Role: runtime.RoleAssistant, Content: "hello"}}
	args, err := s.saveArgs(lease, runtime.Write{Messages: msgs, ActiveAgent: "triage", Release: true}, time.Now())
	if err != nil {
		t.Fatalf("saveArgs: %v", err)
	}
	want := []any{int64(1), int64(1), nil, int64(2), int64(0)} // epoch aside
	for try := range 2 {
		got, err := s.scripts.save.Run(t.Context(), s.client, keysFor(k).list(), args...).Slice()
		if err != nil {
			t.Fatalf("save script, run %d: %v", try+1, err)
		}
		if len(got) != len(want) {
			t.Fatalf("save script, run %d = %v, want %v", try+1, got, want)
		}
		got[2] = nil
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("save script, run %d mismatch (-want +got):\n%s", try+1, diff)
		}
	}
	if n, err := s.client.Exists(t.Context(), keysFor(k).lock).Result(); err != nil || n != 0 {
		t.Errorf("lock keys after a released save = %d, %v; want 0", n, err)
	}
	got, err := s.Load(t.Context(), k)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if diff := cmp.Diff(&runtime.Session{Messages: msgs, ActiveAgent: "triage", Version: 1}, got); diff != "" {
		t.Errorf("Load mismatch (-want +got):\n%s", diff)
	}
}

// With store.wait_replicas a save is acknowledged only once that many
// replicas have it: a Redis without replicas makes every save fail with
// ErrStoreUnavailable (the write itself did happen on the master).
// scripts/redis-scale.sh shows the other side, on a real failover.
// The store timeout leaves WAIT a quarter of it, 500 ms, to answer: 100 ms
// (a 400 ms timeout) was once too little on a loaded machine.
func TestRedisWaitReplicasWithoutReplicas(t *testing.T) {
	s := openRedis(t, Options{WaitReplicas: 1, Timeout: 2 * time.Second})
	k := testKey(t, s)
	ctx := context.Background()
	_, lease, err := s.Acquire(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Save(ctx, k, lease, runtime.Write{Messages: []runtime.Message{{Role: "user", Content: "hi"}}, Release: true})
	if !errors.Is(err, runtime.ErrStoreUnavailable) || !strings.Contains(err.Error(), "0 of the 1 replicas") {
		t.Fatalf("Save = %v, want ErrStoreUnavailable naming the replicas", err)
	}
}
