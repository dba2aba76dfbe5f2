package cache

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// runSave runs the save script. With WaitReplicas it sends WAIT behind it
// on the same connection, in the same round trip: WAIT blocks until that
// many replicas have every write this connection made, so a save is
// acknowledged only once a failover cannot lose it. On a Cluster both go
// to the master that owns the session's slot.
func (s *Redis) runSave(ctx context.Context, keys []string, args []any) ([]any, error) {
	n := s.opts.WaitReplicas
	if n <= 0 {
		return s.scripts.save.Run(ctx, s.client, keys, args...).Slice()
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
	if ok, _ := reply(r).ok(); ok && acked < int64(n) {
		// Save wraps this as ErrStoreUnavailable.
		return nil, fmt.Errorf("the save reached %d of the %d replicas store.wait_replicas asks for", acked, n)
	}
	return r, nil
}
