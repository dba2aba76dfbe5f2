package cache

import (
	"context"
	"errors"
	"net"
	"strings"

	"github.com/redis/go-redis/v9"
)

// reloadOnFailure is a go-redis hook for a Cluster client: a command that
// fails because a node is gone (a refused or broken connection, a timeout)
// or the cluster is reconfiguring makes the client read the slot layout
// again. go-redis re-reads it on its own only on MOVED or ASK, or once a
// minute; a master that died never answers MOVED, so without this hook the
// slots it held would fail for up to a minute after its replica took over.
// ReloadState is asynchronous and coalesces concurrent calls.
type reloadOnFailure struct{ cluster *redis.ClusterClient }

var _ redis.Hook = reloadOnFailure{}

func (h reloadOnFailure) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h reloadOnFailure) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.check(ctx, err)
		return err
	}
}

func (h reloadOnFailure) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h.check(ctx, err)
		return err
	}
}

func (h reloadOnFailure) check(ctx context.Context, err error) {
	if err != nil && layoutMayHaveChanged(err) {
		h.cluster.ReloadState(context.WithoutCancel(ctx))
	}
}

// layoutMayHaveChanged reports an error a failover explains.
func layoutMayHaveChanged(err error) bool {
	if errors.Is(err, redis.Nil) || errors.Is(err, context.Canceled) {
		return false
	}
	var nerr net.Error
	if errors.As(err, &nerr) || errors.Is(err, net.ErrClosed) {
		return true
	}
	msg := err.Error()
	for _, p := range []string{"CLUSTERDOWN", "TRYAGAIN", "READONLY", "LOADING", "MASTERDOWN", "EOF", "connection reset", "broken pipe", "connection refused"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}
