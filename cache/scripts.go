package cache

import (
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/switchboard-ai/switchboard/runtime"
)

// The Redis store's operations are Lua scripts so that each is one round trip
// and atomic. Session scripts take KEYS = msgs, meta, lock (sessionKeys.list);
// lease scripts take KEYS = lock.
//
// Every script is safe to run twice (go-redis retries a command whose
// connection broke, even after Redis ran it): Acquire accepts a lock that
// already holds its own token, Save skips a write id it already applied
// (even once that save released the lock), and Renew and Release compare
// the token first.

// luaRead is shared by acquire and load. It returns the session's state
// (the version as stored, a string, so that a damaged one is reported as
// such rather than cutting the reply short),
// sending only the messages the caller lacks: when the caller's cached epoch
// matches and the list is as long as meta says, messages from index `have`
// on; otherwise all of them. Within one epoch the list only grows, and every
// new session or Replace gets a new random epoch, so a matching epoch means
// the caller's first `have` messages are still the stored ones.
const luaRead = `
local function read(epoch, have)
  local meta = redis.call('HMGET', KEYS[2], 'agent', 'version', 'epoch', 'len', 'approvals')
  if not meta[2] then return nil end
  if meta[4] and not tonumber(meta[4]) then return redis.error_reply('SBCORRUPT its length is not a number') end
  local n = redis.call('LLEN', KEYS[1])
  local from = 0
  if meta[3] == epoch and tonumber(meta[4]) == n and have <= n then from = have end
  return {1, meta[1] or '', meta[2], meta[3] or '', n, from, redis.call('LRANGE', KEYS[1], from, -1), meta[5] or ''}
end
`

// luaAcquire: ARGV = token, lease ms, cached epoch, cached count.
// Returns {0} when another token holds the lock, {1} for a session never
// written, else {1, agent, version, epoch, len, from, {messages from `from`}}.
const luaAcquire = luaRead + `
local held = redis.call('GET', KEYS[3])
if held and held ~= ARGV[1] then return {0} end
redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[2])
return read(ARGV[3], tonumber(ARGV[4])) or {1}
`

// luaLoad: ARGV = cached epoch, cached count. Returns {0} for a session never
// written (or expired), else what luaAcquire returns.
const luaLoad = luaRead + `
return read(ARGV[1], tonumber(ARGV[2])) or {0}
`

// luaSave: ARGV = token, session ttl ms, replace ("1" or "0"), active agent,
// a fresh epoch (used when the session is new or replaced), write id,
// release ("1" or "0"), max session bytes, set approvals ("1" or "0"), the
// approvals as JSON, the write's time (unix ms, kept as meta's updated for
// the session list), then the messages as JSON.
// Returns {0} when the lease is lost (nothing written), {2, bytes} when the
// transcript would grow past max session bytes (nothing written), else {1,
// version, epoch, len, index of the first message written}. meta's bytes
// counts the transcript's JSON (a session stored before it was kept counts
// from 0). With release set the lock is deleted after the write, so
// that a run's last save and its release are one round trip.
// A list that disagrees with meta's len (evicted under memory pressure)
// starts a new epoch so that no cache trusts it; a len or bytes that is not
// a number is damage (an SBCORRUPT error, session_corrupt), never a reason
// to drop the list.
// (luaRead refuses a len that is not a number the same way.)
//
// The write id, unique to one Save call, is checked before the lock: a retry
// of a save that already ran answers as the first run did even though that
// run released the lock (a retry after the lock check would read {0}, a lost
// lease, for a write that happened). Nothing is deleted on a retry: the first
// run did release, and the lock may since be another run's.
const luaSave = `
local count = #ARGV - 11
local meta = redis.call('HMGET', KEYS[2], 'version', 'epoch', 'len', 'write', 'bytes')
if meta[4] == ARGV[6] then
  local n = tonumber(meta[3])
  return {1, tonumber(meta[1]), meta[2], n, n - count}
end
if redis.call('GET', KEYS[3]) ~= ARGV[1] then return {0} end
if meta[3] and not tonumber(meta[3]) then return redis.error_reply('SBCORRUPT its length is not a number') end
if meta[5] and not tonumber(meta[5]) then return redis.error_reply('SBCORRUPT its size in bytes is not a number') end
local epoch = meta[2]
local reset = ARGV[3] == '1' or not epoch or tonumber(meta[3]) ~= redis.call('LLEN', KEYS[1])
local bytes = 0
if not reset then bytes = tonumber(meta[5]) or 0 end
for i = 12, #ARGV do bytes = bytes + #ARGV[i] end
if bytes > tonumber(ARGV[8]) then return {2, bytes} end
if reset then
  redis.call('DEL', KEYS[1])
  epoch = ARGV[5]
end
for i = 12, #ARGV, 1000 do
  redis.call('RPUSH', KEYS[1], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
local n = redis.call('LLEN', KEYS[1])
local version = redis.call('HINCRBY', KEYS[2], 'version', 1)
redis.call('HSET', KEYS[2], 'agent', ARGV[4], 'epoch', epoch, 'len', n, 'write', ARGV[6], 'bytes', bytes, 'updated', ARGV[11])
if ARGV[9] == '1' then redis.call('HSET', KEYS[2], 'approvals', ARGV[10]) end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
if ARGV[7] == '1' then redis.call('DEL', KEYS[3]) end
return {1, version, epoch, n, n - count}
`

// luaRenew: KEYS = lock; ARGV = token, lease ms. 1 when renewed, 0 when lost.
const luaRenew = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
`

// luaRelease: KEYS = lock; ARGV = token. Deletes the lock only if the token
// holds it, so a run that lost its lease cannot free another run's lock.
const luaRelease = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1
`

// scripts are one store's loaded scripts.
type scripts struct {
	acquire, load, save, renew, release *redis.Script
	remember                            *redis.Script // facts.go
	index                               *redis.Script // redisindex.go
}

func newScripts() scripts {
	return scripts{
		acquire:  redis.NewScript(luaAcquire),
		load:     redis.NewScript(luaLoad),
		save:     redis.NewScript(luaSave),
		renew:    redis.NewScript(luaRenew),
		release:  redis.NewScript(luaRelease),
		remember: redis.NewScript(luaRemember),
		index:    redis.NewScript(luaIndex),
	}
}

// reply reads a script's array reply, whose first item is a status: 1 for
// done, 0 for the refusal the script documents.
type reply []any

// ok reads the status. A reply this store cannot read counts as a store
// failure.
func (r reply) ok() (bool, error) {
	n, err := r.int(0)
	if err != nil {
		return false, fmt.Errorf("%w: %v", runtime.ErrStoreUnavailable, err)
	}
	return n == 1, nil
}

func (r reply) int(i int) (int64, error) {
	if i >= len(r) {
		return 0, fmt.Errorf("script reply has %d items, want more than %d", len(r), i)
	}
	n, ok := r[i].(int64)
	if !ok {
		return 0, fmt.Errorf("script reply item %d is %T, want an integer", i, r[i])
	}
	return n, nil
}

func (r reply) str(i int) (string, error) {
	if i >= len(r) {
		return "", fmt.Errorf("script reply has %d items, want more than %d", len(r), i)
	}
	s, ok := r[i].(string)
	if !ok {
		return "", fmt.Errorf("script reply item %d is %T, want a string", i, r[i])
	}
	return s, nil
}

func (r reply) list(i int) ([]any, error) {
	if i >= len(r) {
		return nil, fmt.Errorf("script reply has %d items, want more than %d", len(r), i)
	}
	l, ok := r[i].([]any)
	if !ok {
		return nil, fmt.Errorf("script reply item %d is %T, want an array", i, r[i])
	}
	return l, nil
}
