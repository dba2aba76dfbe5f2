package cache

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/switchboard-ai/switchboard/runtime"
)

// commandCounter is a go-redis hook that counts the commands sent and the
// round trips they took.
type commandCounter struct {
	mu           sync.Mutex
	cmds, rounds int
	names        []string
}

func (c *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.add(cmd)
		return next(ctx, cmd)
	}
}

func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.add(cmds...)
		return next(ctx, cmds)
	}
}

func (c *commandCounter) add(cmds ...redis.Cmder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	counted := false
	for _, cmd := range cmds {
		switch cmd.Name() {
		case "hello", "client", "auth", "select":
			continue // a new connection's handshake, not the caller's work
		}
		c.cmds++
		c.names = append(c.names, cmd.Name())
		counted = true
	}
	if counted {
		c.rounds++
	}
}

// take returns the counts so far and starts again.
func (c *commandCounter) take() (cmds, rounds int, names []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cmds, rounds, names = c.cmds, c.rounds, c.names
	c.cmds, c.rounds, c.names = 0, 0, nil
	return cmds, rounds, names
}

// The session index costs a save the same few commands in one round trip
// however many sessions the principal has, however long its transcript,
// and keeps the index within maxListed.
func TestRedisSaveIndexCostIsConstant(t *testing.T) {
	s := openRedis(t, Options{})
	counter := &commandCounter{}
	s.client.AddHook(counter)
	p := "cache-test-" + rand.Text()
	t.Cleanup(func() { _ = s.client.Del(context.Background(), indexKey(p)).Err() })

	// saveOne saves one step of session id with n messages and returns the
	// commands and round trips that Save alone cost.
	saveOne := func(id string, n int) (int, int, []string) {
		t.Helper()
		k := runtime.SessionKey{Principal: p, ID: id}
		t.Cleanup(func() { _ = s.Delete(context.Background(), k) })
		_, lease, err := s.Acquire(t.Context(), k)
		if err != nil {
			t.Fatalf("Acquire: %v", err)
		}
		msgs := make([]runtime.Message, n)
		for i := range msgs {
			msgs[i] = runtime.Message{Role: runtime.RoleUser, Content: fmt.Sprint(i)}
		}
		counter.take()
		if _, err := s.Save(t.Context(), k, lease, runtime.Write{Messages: msgs, Release: true}); err != nil {
			t.Fatalf("Save: %v", err)
		}
		return counter.take()
	}

	saveOne("warm-up", 1) // loads the script, should Redis lack it
	cmds, rounds, names := saveOne("first", 1)
	t.Logf("a save sends %d commands in %d round trip(s): %v", cmds, rounds, names)
	if rounds != 1 {
		t.Errorf("a save took %d round trips, want 1", rounds)
	}
	for i := range maxListed + 20 {
		id := fmt.Sprintf("s%04d", i)
		n := 1
		if i == maxListed+10 {
			n = 500 // a long transcript costs no more commands
		}
		c, r, nm := saveOne(id, n)
		if c != cmds || r != rounds {
			t.Fatalf("save of session %d (index of %d) sent %d commands in %d round trips (%v), want %d in %d like the first",
				i, i+1, c, r, nm, cmds, rounds)
		}
	}
	size, err := s.client.ZCard(t.Context(), indexKey(p)).Result()
	if err != nil {
		t.Fatal(err)
	}
	if size != maxListed {
		t.Errorf("index holds %d sessions after %d saves, want the newest %d", size, maxListed+21, maxListed)
	}
	got, err := s.List(t.Context(), p, 3)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	var ids []string
	for _, g := range got {
		ids = append(ids, g.ID)
	}
	if fmt.Sprint(ids) != fmt.Sprint([]string{fmt.Sprintf("s%04d", maxListed+19), fmt.Sprintf("s%04d", maxListed+18), fmt.Sprintf("s%04d", maxListed+17)}) {
		t.Errorf("List(3) = %v, want the three newest", ids)
	}
}

// Index entries whose session is gone without a Delete (evicted, or
// expired between writes) are skipped, however many of them stand before
// the live ones, and List removes them from the index.
func TestRedisListSkipsVanishedSessions(t *testing.T) {
	s := openRedis(t, Options{})
	p := "cache-test-" + rand.Text()
	t.Cleanup(func() { _ = s.client.Del(context.Background(), indexKey(p)).Err() })
	var keys []runtime.SessionKey
	for i := range 45 {
		k := runtime.SessionKey{Principal: p, ID: fmt.Sprintf("s%02d", i)}
		t.Cleanup(func() { _ = s.Delete(context.Background(), k) })
		if _, err := turn(t, s, k, runtime.Write{Messages: []runtime.Message{{Role: runtime.RoleUser, Content: "hi"}}}); err != nil {
			t.Fatalf("turn: %v", err)
		}
		keys = append(keys, k)
	}
	// The 40 newest vanish behind the store's back, as eviction would.
	for _, k := range keys[5:] {
		if err := s.client.Del(t.Context(), keysFor(k).list()...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.List(t.Context(), p, 3)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	var ids []string
	for _, g := range got {
		ids = append(ids, g.ID)
	}
	if fmt.Sprint(ids) != "[s04 s03 s02]" {
		t.Errorf("List(3) = %v, want [s04 s03 s02]", ids)
	}
	if n, err := s.client.ZCard(t.Context(), indexKey(p)).Result(); err != nil || n > 5 {
		t.Errorf("index holds %d entries (%v) after List, want the vanished ones gone", n, err)
	}
}

// A Redis that does not know the index script (restarted, scripts flushed)
// answers the save's EVALSHA with NOSCRIPT: the store then sends the
// script itself, so the save is still listed. (The shared test Redis's
// scripts are not flushed here; the failed command is made by hand.)
func TestRedisIndexSendsItsScriptAfterNoscript(t *testing.T) {
	s := openRedis(t, Options{})
	p := "cache-test-" + rand.Text()
	t.Cleanup(func() { _ = s.client.Del(context.Background(), indexKey(p)).Err() })
	key := runtime.SessionKey{Principal: p, ID: "s1"}
	failed := redis.NewCmd(context.Background(), "evalsha")
	failed.SetErr(replyError("NOSCRIPT No matching script. Please use EVAL."))
	now := time.Now()
	s.indexed(context.Background(), failed, key, now)
	score, err := s.client.ZScore(context.Background(), indexKey(p), "s1").Result()
	if err != nil || int64(score) != now.UnixMilli() {
		t.Fatalf("index after NOSCRIPT: score %v, %v; want %d", score, err, now.UnixMilli())
	}
	// Any other failure is left alone: the next save puts the session back.
	other := redis.NewCmd(context.Background(), "evalsha")
	other.SetErr(replyError("LOADING Redis is loading the dataset in memory"))
	s.indexed(context.Background(), other, runtime.SessionKey{Principal: p, ID: "s2"}, now)
	if n, _ := s.client.ZCard(context.Background(), indexKey(p)).Result(); n != 1 {
		t.Fatalf("index holds %d sessions, want 1", n)
	}
}

// replyError is an error reply of Redis's, as go-redis reports one
// (redis.Error).
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}
