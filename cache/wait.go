package cache

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/switchboard-ai/switchboard/runtime"
)

// runSave runs the save script of key's write at now, with the update of
// the principal's session index (redisindex.go) in the same pipeline: one
// round trip (a Cluster sends each node its part at once), shared with
// other runs' commands when many wait (batch.go). The index is
// best effort: a save that succeeded succeeds even if its index update
// failed, and the next save puts the session back in place.
//
// With WaitReplicas it sends WAIT behind the script on the same connection,
// in the same round trip: WAIT blocks until that many replicas have every
// write this connection made, so a save is acknowledged only once a
// failover cannot lose it. On a Cluster both go to the master that owns the
// session's slot, and the index, in a slot of its own, is then written
// after the acknowledged save.
func (s *Redis) runSave(ctx context.Context, key runtime.SessionKey, args []any, now time.Time) ([]any, error) {
	keys := keysFor(key).list()
	n := s.opts.WaitReplicas
	if n <= 0 {
		run := func(eval func(p redis.Pipeliner) *redis.Cmd) ([]any, error) {
			var save, idx *redis.Cmd
			add := func(p redis.Pipeliner) {
				save = eval(p)
				idx = s.index(ctx, p, key, now)
			}
			alone := func() {
				_, _ = s.client.Pipelined(ctx, func(p redis.Pipeliner) error { add(p); return nil })
			}
			if err := s.batch.do(ctx, alone, add); err != nil {
				return nil, err
			}
			s.indexed(ctx, idx, key, now)
			return save.Slice()
		}
		r, err := run(func(p redis.Pipeliner) *redis.Cmd { return s.scripts.save.EvalSha(ctx, p, keys, args...) })
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			// The save did not run; send the script itself this once.
			r, err = run(func(p redis.Pipeliner) *redis.Cmd { return s.scripts.save.Eval(ctx, p, keys, args...) })
		}
		return r, err
	}
	var conn redis.Cmdable = s.client
	cluster, isCluster := s.client.(*redis.ClusterClient)
	if isCluster {
		node, err := cluster.MasterForKey(ctx, keys[0])
		if err != nil {
			return nil, err
		}
		conn = node
	}
	// WAIT gives up a little before the store timeout, so that its answer
	// (how many replicas have the write) still arrives.
	waitMS := max(s.opts.Timeout.Milliseconds()*3/4, 1)
	pipe := func(eval func(p redis.Pipeliner) *redis.Cmd) ([]any, int64, error) {
		var save, wait *redis.Cmd
		_, err := conn.Pipelined(ctx, func(p redis.Pipeliner) error {
			save = eval(p)
			wait = p.Do(ctx, "WAIT", n, waitMS)
			return nil
		})
		if err != nil && save.Err() == nil && wait.Err() == nil {
			return nil, 0, err
		}
		r, err := save.Slice()
		if err != nil {
			return nil, 0, err
		}
		acked, err := wait.Int64()
		return r, acked, err
	}
	r, acked, err := pipe(func(p redis.Pipeliner) *redis.Cmd { return s.scripts.save.EvalSha(ctx, p, keys, args...) })
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		// The save did not run; send the script itself this once.
		r, acked, err = pipe(func(p redis.Pipeliner) *redis.Cmd { return s.scripts.save.Eval(ctx, p, keys, args...) })
	}
	if err != nil {
		if isCluster {
			// The slot's master may have changed (a failover): have the
			// client learn the layout again, so that the next save goes
			// to the new master. (The cluster client does this itself
			// for the commands it routes; this one went to a node.)
			cluster.ReloadState(context.WithoutCancel(ctx))
		}
		return nil, err
	}
	ok, _ := reply(r).ok()
	if ok && acked < int64(n) {
		// Save wraps this as ErrStoreUnavailable.
		return nil, fmt.Errorf("the save reached %d of the %d replicas store.wait_replicas asks for", acked, n)
	}
	if ok {
		keys, args := s.indexArgs(key, now)
		_ = s.scripts.index.Run(ctx, s.client, keys, args...).Err() // go-redis sends the script on NOSCRIPT
	}
	return r, nil
}
