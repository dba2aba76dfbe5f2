package cache

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/ratelimit"
)

// The rate limiters keep each principal's token buckets (see package
// ratelimit) where its store keeps sessions: in this process for the memory
// store, in Redis for the Redis store, so that every gateway on one Redis
// counts against the same limits. A Redis limiter makes one round trip per
// call (a Lua script on one key, so it works on a Cluster) and reads the
// time from Redis, so gateways whose clocks disagree still agree.

// MemoryLimiter counts in this process. It is safe for concurrent use; it
// holds one entry per principal, and principals are the configured keys.
type MemoryLimiter struct {
	mu      sync.Mutex
	buckets map[string]*ratelimit.Buckets
	now     func() time.Time
}

// NewMemoryLimiter returns a limiter for one gateway process.
func NewMemoryLimiter() *MemoryLimiter {
	return &MemoryLimiter{buckets: make(map[string]*ratelimit.Buckets), now: time.Now}
}

func (m *MemoryLimiter) get(principal string) *ratelimit.Buckets {
	b := m.buckets[principal]
	if b == nil {
		b = new(ratelimit.Buckets)
		m.buckets[principal] = b
	}
	return b
}

// Admit counts one request of principal under l.
func (m *MemoryLimiter) Admit(_ context.Context, principal string, l graphs.Limits) (ratelimit.State, error) {
	m.mu.Lock()
	levels, ok := ratelimit.Admit(m.get(principal), l, m.now().UnixMilli())
	m.mu.Unlock()
	return ratelimit.StateOf(l, levels, ok), nil
}

// Charge takes a run's tokens from principal's token buckets.
func (m *MemoryLimiter) Charge(_ context.Context, principal string, l graphs.Limits, tokens int64) error {
	m.mu.Lock()
	ratelimit.Charge(m.get(principal), l, tokens, m.now().UnixMilli())
	m.mu.Unlock()
	return nil
}

// luaLimit is ratelimit.Admit and ratelimit.Charge on the hash KEYS[1],
// whose fields l1..l3 and t1..t3 are the buckets' levels and times.
// ARGV = op ("admit" or "charge"), tokens, then capacity and period (ms)
// of the requests, tokens-per-minute and tokens-per-day buckets (capacity
// 0: unlimited). Returns {admitted (1 or 0), level1, level2, level3} with
// the levels as strings (a Lua number returned as such would be cut to an
// integer). Times come from Redis's clock.
const luaLimit = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local f = redis.call('HMGET', KEYS[1], 'l1', 't1', 'l2', 't2', 'l3', 't3')
local charge = ARGV[1] == 'charge'
local tokens = tonumber(ARGV[2])
local caps, periods, levels = {}, {}, {}
local ok = 1
local ttl = 0
for i = 1, 3 do
  caps[i] = tonumber(ARGV[1 + 2 * i])
  periods[i] = tonumber(ARGV[2 + 2 * i])
  levels[i] = 0
  if caps[i] > 0 then
    local level, at = tonumber(f[2 * i - 1]), tonumber(f[2 * i])
    if level and at then
      levels[i] = math.min(caps[i], level + math.max(now - at, 0) * caps[i] / periods[i])
    else
      levels[i] = caps[i]
    end
    if not charge and ((i == 1 and levels[i] < 1) or (i > 1 and levels[i] <= 0)) then ok = 0 end
  end
end
for i = 1, 3 do
  if caps[i] > 0 then
    if charge and i > 1 then levels[i] = levels[i] - tokens end
    if not charge and i == 1 and ok == 1 then levels[i] = levels[i] - 1 end
    redis.call('HSET', KEYS[1], 'l' .. i, string.format('%.17g', levels[i]), 't' .. i, now)
    ttl = math.max(ttl, (caps[i] - levels[i]) * periods[i] / caps[i])
  end
end
redis.call('PEXPIRE', KEYS[1], math.ceil(ttl) + 1000)
return {ok, string.format('%.17g', levels[1]), string.format('%.17g', levels[2]), string.format('%.17g', levels[3])}
`

// RedisLimiter counts in Redis, shared by every gateway on it. It is safe
// for concurrent use.
type RedisLimiter struct {
	client  redis.UniversalClient
	timeout time.Duration
	script  *redis.Script
}

// Limiter returns a rate limiter that counts in this store's Redis.
func (s *Redis) Limiter() *RedisLimiter {
	return &RedisLimiter{client: s.client, timeout: s.opts.Timeout, script: redis.NewScript(luaLimit)}
}

// limitKey is principal's buckets; the hash tag keeps it in one slot.
func limitKey(principal string) string { return "sb:rl:{" + escape(principal) + "}" }

func (r *RedisLimiter) run(ctx context.Context, op, principal string, l graphs.Limits, tokens int64) ([ratelimit.NumBuckets]float64, bool, error) {
	caps := ratelimit.Caps(l)
	args := []any{op, tokens}
	for i, c := range caps {
		args = append(args, c, ratelimit.Periods[i])
	}
	bctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	raw, err := r.script.Run(bctx, r.client, []string{limitKey(principal)}, args...).Slice()
	if err != nil {
		return [ratelimit.NumBuckets]float64{}, false, fail(ctx, "rate limit "+op, err)
	}
	rep := reply(raw)
	ok, err := rep.ok()
	if err != nil {
		return [ratelimit.NumBuckets]float64{}, false, fmt.Errorf("rate limit %s: %w", op, err)
	}
	var levels [ratelimit.NumBuckets]float64
	for i := range levels {
		s, err := rep.str(i + 1)
		if err == nil {
			levels[i], err = strconv.ParseFloat(s, 64)
		}
		if err != nil {
			return levels, false, fail(ctx, "rate limit "+op, err)
		}
	}
	return levels, ok, nil
}

// Admit counts one request of principal under l, in one round trip.
func (r *RedisLimiter) Admit(ctx context.Context, principal string, l graphs.Limits) (ratelimit.State, error) {
	levels, ok, err := r.run(ctx, "admit", principal, l, 0)
	if err != nil {
		return ratelimit.State{}, err
	}
	return ratelimit.StateOf(l, levels, ok), nil
}

// Charge takes a run's tokens from principal's token buckets, in one
// round trip.
func (r *RedisLimiter) Charge(ctx context.Context, principal string, l graphs.Limits, tokens int64) error {
	_, _, err := r.run(ctx, "charge", principal, l, tokens)
	return err
}
