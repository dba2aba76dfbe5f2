package cache

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// batcher sends the store's session commands (acquire, load, save, renew,
// release) of the runs that wait for a connection in shared pipelines.
//
// A command holds a pool connection for its round trip, and under load
// that round trip is mostly the wait of the goroutine holding it for a
// CPU. With 9,700 streams opening within 2 s on two cores, 200
// connections served about 2,000 acquires a second while 4,850 came, and
// the rest waited for a connection past the store timeout (issue 22). So
// while fewer than limit (the pool's size) round trips are in flight, a
// caller's commands go at once, as they did before; past that they wait
// for the next pipeline, which takes every command waiting when a round
// trip in flight returns. One round trip then serves them all, and none
// waits for a connection. (A save that waits for replicas keeps its own
// connection: WAIT counts the writes of the connection it is sent on.)
type batcher struct {
	client  redis.UniversalClient
	timeout time.Duration // bounds a pipeline of waiting commands
	limit   int           // pipelines in flight at once

	mu      sync.Mutex
	idle    sync.Cond // signalled when running falls to 0
	running int
	waiting []*batchOp
}

// batchOp is a caller's commands waiting for the next pipeline.
type batchOp struct {
	ctx  context.Context
	add  func(p redis.Pipeliner)
	err  error         // set, before done closes, when add was not sent
	done chan struct{} // closed once the pipeline ran, or was not sent
}

func newBatcher(client redis.UniversalClient, timeout time.Duration, limit int) *batcher {
	b := &batcher{client: client, timeout: timeout, limit: max(limit, 1)}
	b.idle.L = &b.mu
	return b
}

// do runs a caller's commands and returns once they ran: alone, at once,
// while fewer than limit pipelines are in flight; else add queues them on
// the next pipeline. Each command then holds its own reply or error
// (go-redis sets every command's error when a pipeline fails as a whole).
// A non-nil error means ctx ended first: the commands may not have run,
// and must not be read. As for any command whose reply never came, Redis
// may still run them.
func (b *batcher) do(ctx context.Context, alone func(), add func(p redis.Pipeliner)) error {
	b.mu.Lock()
	if b.running < b.limit {
		b.running++
		b.mu.Unlock()
		alone()
		b.next()
		return nil
	}
	op := &batchOp{ctx: ctx, add: add, done: make(chan struct{})}
	b.waiting = append(b.waiting, op)
	b.mu.Unlock()
	select {
	case <-op.done:
		return op.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// next hands a returned pipeline's place to the commands waiting, if any.
func (b *batcher) next() {
	b.mu.Lock()
	ops := b.waiting
	b.waiting = nil
	if len(ops) == 0 {
		if b.running--; b.running == 0 {
			b.idle.Broadcast()
		}
		b.mu.Unlock()
		return
	}
	b.mu.Unlock()
	go b.send(ops)
}

// send runs ops in one pipeline, in the order they came, and then takes
// the next commands waiting.
func (b *batcher) send(ops []*batchOp) {
	live := ops[:0]
	for _, op := range ops {
		if err := op.ctx.Err(); err != nil {
			op.err = err
			close(op.done)
			continue
		}
		live = append(live, op)
	}
	if len(live) > 0 {
		// The first caller's trace holds the pipeline's span; its own
		// cancellation must not end the others' commands.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(live[0].ctx), b.timeout)
		_, _ = b.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, op := range live {
				op.add(p)
			}
			return nil
		})
		cancel()
		for _, op := range live {
			close(op.done)
		}
	}
	b.next()
}

// wait returns once no pipeline is in flight and none waits.
func (b *batcher) wait() {
	b.mu.Lock()
	for b.running > 0 {
		b.idle.Wait()
	}
	b.mu.Unlock()
}

// script runs sc as Script.Run runs it, by its hash and then by its text
// if Redis does not have it, on the next pipeline when many wait.
func (s *Redis) script(ctx context.Context, sc *redis.Script, keys []string, args ...any) *redis.Cmd {
	cmd := s.queue(ctx, func(c redis.Scripter) *redis.Cmd { return sc.EvalSha(ctx, c, keys, args...) })
	if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
		cmd = s.queue(ctx, func(c redis.Scripter) *redis.Cmd { return sc.Eval(ctx, c, keys, args...) })
	}
	return cmd
}

// queue runs the command add makes: on the client, or on the next pipeline.
func (s *Redis) queue(ctx context.Context, add func(c redis.Scripter) *redis.Cmd) *redis.Cmd {
	var cmd *redis.Cmd
	err := s.batch.do(ctx, func() { cmd = add(s.client) }, func(p redis.Pipeliner) { cmd = add(p) })
	if err != nil {
		failed := redis.NewCmd(ctx)
		failed.SetErr(err)
		return failed
	}
	return cmd
}
