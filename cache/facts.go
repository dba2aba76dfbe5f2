package cache

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/switchboard-ai/switchboard/runtime"
)

// Memory slots' facts (CONTRACT §9) live beside the sessions, outlive them,
// and are kept per value of a slot's scope: a list of facts, oldest first,
// whose bytes (the sum of the facts' lengths) stay within the slot's
// max_bytes by dropping the oldest, and which expire the slot's ttl after
// their last write.

var (
	_ runtime.MemoryStore = (*Memory)(nil)
	_ runtime.MemoryStore = (*Redis)(nil)
)

// factsKey names key's facts. Every part is escaped and the parts are
// joined by ':' (and scope names from values by '='), which escaping never
// leaves, so that no two keys share a name. The principal is the hash tag,
// never an empty one (Redis Cluster ignores "{}"), so that a slot value's
// keys share one Cluster slot even for the anonymous principal.
func factsKey(key runtime.MemoryKey) string {
	var b strings.Builder
	b.WriteString("sb:mem:{p=")
	b.WriteString(escape(key.Principal))
	b.WriteString("}:")
	b.WriteString(escape(key.Slot))
	for _, v := range key.Scope {
		b.WriteByte(':')
		b.WriteString(escape(v.Name))
		b.WriteByte('=')
		b.WriteString(escape(v.Value))
	}
	return b.String()
}

// memFacts is one value of a slot in the memory store.
type memFacts struct {
	facts   []string
	expires time.Time
}

// Remember appends fact to key's facts and trims them to maxBytes.
func (m *Memory) Remember(ctx context.Context, key runtime.MemoryKey, fact string, maxBytes int, ttl time.Duration) (int, error) {
	if len(fact) > maxBytes {
		return 0, fmt.Errorf("remember: %w: %d bytes, at most %d", runtime.ErrFactTooLarge, len(fact), maxBytes)
	}
	if err := m.begin(ctx, "remember in"); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	now := time.Now()
	k := factsKey(key)
	f := m.liveFacts(k, now)
	if f == nil {
		f = &memFacts{}
		m.facts[k] = f
	}
	facts, dropped := trimFacts(append(f.facts, fact), maxBytes)
	f.facts = facts
	f.expires = now.Add(ttl)
	return dropped, nil
}

// Recall returns key's facts.
func (m *Memory) Recall(ctx context.Context, key runtime.MemoryKey) ([]string, error) {
	if err := m.begin(ctx, "recall from"); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	f := m.liveFacts(factsKey(key), time.Now())
	if f == nil {
		return nil, nil
	}
	return append([]string(nil), f.facts...), nil
}

// Forget drops key's facts.
func (m *Memory) Forget(ctx context.Context, key runtime.MemoryKey) error {
	if err := m.begin(ctx, "forget in"); err != nil {
		return err
	}
	defer m.mu.Unlock()
	delete(m.facts, factsKey(key))
	return nil
}

// liveFacts returns the facts under k unless they expired (then dropped).
// The caller holds m.mu.
func (m *Memory) liveFacts(k string, now time.Time) *memFacts {
	f := m.facts[k]
	if f != nil && !now.Before(f.expires) {
		delete(m.facts, k)
		return nil
	}
	return f
}

// sweepFacts drops expired facts. The caller holds m.mu.
func (m *Memory) sweepFacts(now time.Time) {
	for k, f := range m.facts {
		if !now.Before(f.expires) {
			delete(m.facts, k)
		}
	}
}

// trimFacts drops the oldest facts while their bytes exceed maxBytes, as
// luaRemember does.
func trimFacts(facts []string, maxBytes int) ([]string, int) {
	total := 0
	for _, f := range facts {
		total += len(f)
	}
	drop := 0
	for total > maxBytes && drop < len(facts) {
		total -= len(facts[drop])
		drop++
	}
	return append([]string(nil), facts[drop:]...), drop
}

// luaRemember: KEYS = facts, last write id; ARGV = fact, max bytes, ttl ms,
// write id. Returns how many facts were dropped. A retry of a write that
// already ran (go-redis retries a command whose connection broke) appends
// nothing: the write id of the last append is kept beside the facts.
const luaRemember = `
if redis.call('GET', KEYS[2]) == ARGV[4] then return 0 end
redis.call('RPUSH', KEYS[1], ARGV[1])
local items = redis.call('LRANGE', KEYS[1], 0, -1)
local total = 0
for i = 1, #items do total = total + #items[i] end
local max = tonumber(ARGV[2])
local drop = 0
while total > max and drop < #items do
  drop = drop + 1
  total = total - #items[drop]
end
if drop > 0 then redis.call('LTRIM', KEYS[1], drop, -1) end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('SET', KEYS[2], ARGV[4], 'PX', ARGV[3])
return drop
`

// Remember appends fact to key's facts and trims them to maxBytes, in one
// round trip.
func (s *Redis) Remember(ctx context.Context, key runtime.MemoryKey, fact string, maxBytes int, ttl time.Duration) (int, error) {
	if len(fact) > maxBytes {
		return 0, fmt.Errorf("remember: %w: %d bytes, at most %d", runtime.ErrFactTooLarge, len(fact), maxBytes)
	}
	k := factsKey(key)
	bctx, cancel := s.bound(ctx)
	defer cancel()
	ms := max(ttl.Milliseconds(), 1)
	n, err := s.scripts.remember.Run(bctx, s.client, []string{k, k + ":w"}, fact, maxBytes, ms, rand.Text()).Int()
	if err != nil {
		return 0, fail(ctx, "remember", err)
	}
	return n, nil
}

// Recall returns key's facts.
func (s *Redis) Recall(ctx context.Context, key runtime.MemoryKey) ([]string, error) {
	bctx, cancel := s.bound(ctx)
	defer cancel()
	facts, err := s.client.LRange(bctx, factsKey(key), 0, -1).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fail(ctx, "recall", err)
	}
	return facts, nil
}

// Forget drops key's facts.
func (s *Redis) Forget(ctx context.Context, key runtime.MemoryKey) error {
	bctx, cancel := s.bound(ctx)
	defer cancel()
	k := factsKey(key)
	if err := s.client.Del(bctx, k, k+":w").Err(); err != nil {
		return fail(ctx, "forget", err)
	}
	return nil
}
