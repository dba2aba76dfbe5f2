package cache

// The Redis store lists a principal's sessions from a sorted set,
//
//	sb:idx:{<principal>}  member: session id, score: its last write (unix ms)
//
// which every Save updates in the same round trip as the session itself,
// with a constant number of commands: ZADD the session, drop the entries
// older than session_ttl (their sessions have expired) and those past the
// newest maxListed, and refresh the set's own TTL. The set lives in its own
// hash slot (a principal's sessions are spread over the Cluster), so it is
// written beside the save script, in the same pipeline, rather than by it.
//
// The set is an index, not the truth: List reads each candidate's meta (its
// agent, version and the time its last successful save recorded), skips
// and removes the entries whose session is gone (deleted, expired, or
// evicted), and sorts by the recorded time. A save that failed (a lost
// lease, a session over max_session_bytes) may have moved its entry up
// without writing: the session is then listed with its real time, at worst
// one place off until its next save.

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/switchboard-ai/switchboard/runtime"
)

// maxListed bounds a principal's index: past it, the sessions written least
// recently drop out of the list (they still live and load).
const maxListed = 1000

// indexKey is principal's session index.
func indexKey(principal string) string { return "sb:idx:{" + escape(principal) + "}" }

// index queues key's index update for a save at now on p: one script
// (luaIndex), whatever the index holds; indexed checks its answer.
func (s *Redis) index(ctx context.Context, p redis.Pipeliner, key runtime.SessionKey, now time.Time) *redis.Cmd {
	keys, args := s.indexArgs(key, now)
	return s.scripts.index.EvalSha(ctx, p, keys, args...)
}

// indexArgs are luaIndex's KEYS and ARGV for a save of key at now.
func (s *Redis) indexArgs(key runtime.SessionKey, now time.Time) ([]string, []any) {
	ms := now.UnixMilli()
	return []string{indexKey(key.Principal)},
		[]any{ms, key.ID, ms - s.opts.SessionTTL.Milliseconds(), maxListed, s.opts.SessionTTL.Milliseconds()}
}

// indexed checks the index update sent with a save: a Redis that does not
// know the script yet (restarted, or its scripts flushed) is sent it once
// now, so that this save is listed and the next ones go by its hash. Every
// save in flight then finds the script missing at once, so the text goes
// as the save's commands go, on the next pipeline when many wait: sent one
// at a time on the pool, 99 of them took seconds (batch.go).
func (s *Redis) indexed(ctx context.Context, cmd *redis.Cmd, key runtime.SessionKey, now time.Time) {
	if cmd == nil || cmd.Err() == nil || !redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
		return
	}
	keys, args := s.indexArgs(key, now)
	_ = s.queue(ctx, func(c redis.Scripter) *redis.Cmd { return s.scripts.index.Eval(ctx, c, keys, args...) }).Err()
}

// luaIndex: KEYS = the principal's index; ARGV = the write's time (unix
// ms), the session id, the oldest time still listed, how many to keep, the
// index's ttl (ms). One command on the save's round trip instead of four:
// add, drop what expired, trim to the newest, refresh the ttl.
const luaIndex = `
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[3])
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -tonumber(ARGV[4]) - 1)
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 1
`

// List returns up to limit of principal's live sessions, the most recently
// written first.
func (s *Redis) List(ctx context.Context, principal string, limit int) ([]runtime.SessionInfo, error) {
	const op = "list sessions"
	out := []runtime.SessionInfo{}
	if limit <= 0 {
		return out, nil
	}
	bctx, cancel := s.bound(ctx)
	defer cancel()
	idx := indexKey(principal)
	seen := make(map[string]bool)
	var dead []any
	// Read the index newest first, a page at a time, until limit live
	// sessions are found: the dead are few (the write path drops the
	// expired, Delete its own), and the index is bounded by maxListed. A
	// page has some room for them, so that a small limit does not take a
	// round trip per dead entry.
	page := int64(max(2*limit, 32))
	for start := int64(0); len(out) < limit; {
		zs, err := s.client.ZRevRangeWithScores(bctx, idx, start, start+page-1).Result()
		if err != nil {
			return nil, fail(ctx, op, err)
		}
		metas := make([]*redis.SliceCmd, len(zs))
		_, err = s.client.Pipelined(bctx, func(p redis.Pipeliner) error {
			for i, z := range zs {
				id, _ := z.Member.(string)
				metas[i] = p.HMGet(bctx, keysFor(runtime.SessionKey{Principal: principal, ID: id}).meta, "agent", "version", "updated")
			}
			return nil
		})
		if err != nil {
			return nil, fail(ctx, op, err)
		}
		for i, z := range zs {
			id, _ := z.Member.(string)
			if seen[id] { // a write moved it while we read
				continue
			}
			seen[id] = true
			info, ok := listed(id, z.Score, metas[i].Val())
			if !ok {
				dead = append(dead, id)
				continue
			}
			out = append(out, info)
		}
		start += int64(len(zs))
		if int64(len(zs)) < page {
			break
		}
	}
	if len(dead) > 0 {
		// Best effort: the next List skips them again.
		_ = s.client.ZRem(bctx, idx, dead...).Err()
	}
	slices.SortStableFunc(out, func(a, b runtime.SessionInfo) int { return b.UpdatedAt.Compare(a.UpdatedAt) })
	return out[:min(limit, len(out))], nil
}

// listed reads what HMGET agent version updated returned of session id,
// whose index score is score; false when the session is gone. A session
// saved before the index existed has no updated: its score stands in. A
// version that is not a number (a damaged session, which GET reports as
// session_corrupt) is listed as 0, so that the session can be found and
// deleted.
func listed(id string, score float64, vals []any) (runtime.SessionInfo, bool) {
	if len(vals) != 3 || vals[1] == nil {
		return runtime.SessionInfo{}, false
	}
	agent, _ := vals[0].(string)
	version, _ := strconv.ParseInt(fmt.Sprint(vals[1]), 10, 64)
	ms := int64(score)
	if u, ok := vals[2].(string); ok {
		if n, err := strconv.ParseInt(u, 10, 64); err == nil {
			ms = n
		}
	}
	return runtime.SessionInfo{ID: id, ActiveAgent: agent, Version: version, UpdatedAt: time.UnixMilli(ms)}, true
}
