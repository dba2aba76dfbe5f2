package cache

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/switchboard-ai/switchboard/internal/testenv"
	"github.com/switchboard-ai/switchboard/runtime"
)

// pipelines is a go-redis hook that records the commands of every
// pipeline a client sends and how many were in flight at once; with hold
// set, the first pipeline waits until hold closes (held closes then).
type pipelines struct {
	inFlight, most atomic.Int64
	hold, held     chan struct{}
	once           sync.Once

	mu    sync.Mutex
	sizes []int
}

func (h *pipelines) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *pipelines) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *pipelines) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if connSetup(cmds) {
			return next(ctx, cmds)
		}
		n := h.inFlight.Add(1)
		defer h.inFlight.Add(-1)
		for m := h.most.Load(); n > m && !h.most.CompareAndSwap(m, n); m = h.most.Load() {
		}
		h.mu.Lock()
		h.sizes = append(h.sizes, len(cmds))
		h.mu.Unlock()
		if h.hold != nil {
			h.once.Do(func() {
				close(h.held)
				<-h.hold
			})
		}
		return next(ctx, cmds)
	}
}

// sent returns how many pipelines went and their commands.
func (h *pipelines) sent() (pipelines, commands int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, n := range h.sizes {
		commands += n
	}
	return len(h.sizes), commands
}

// connSetup reports whether cmds are the pipeline go-redis sends on a new
// connection (HELLO, CLIENT SETINFO), inside the pipeline that dialled it.
func connSetup(cmds []redis.Cmder) bool {
	return len(cmds) > 0 && (cmds[0].Name() == "hello" || cmds[0].Name() == "client")
}

// withQuery adds a query option to a store URL.
func withQuery(u, opt string) string {
	if strings.Contains(u, "?") {
		return u + "&" + opt
	}
	return u + "?" + opt
}

// Many runs at once on a store whose every round trip takes 50 ms: with
// one connection in its pool, 100 runs sent one command at a time would
// need 5 s for their acquires alone, and most would fail past the store's
// 2 s timeout (as 9,700 streams opening within 2 s on two cores did, where
// the round trips were slow for want of a CPU, issue 22). Sharing
// pipelines, every run takes its lock, saves and releases it, with one
// pipeline in flight at a time, in fewer round trips than runs.
func TestRedisRunsShareRoundTripsWhenThePoolIsBusy(t *testing.T) {
	u := testRedisURL(t)
	if !strings.HasPrefix(u, "redis://") {
		t.Skipf("relays one Redis; the store is %s", u)
	}
	o, err := redis.ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	far := testenv.SlowRelay(t, o.Addr, 50*time.Millisecond)
	s := openRedis(t, Options{URL: fmt.Sprintf("redis://%s/%d?pool_size=1", far, o.DB)})
	near := openRedis(t, Options{}) // cleans up at once
	hook := &pipelines{}
	s.client.AddHook(hook)

	const runs = 100
	var wg sync.WaitGroup
	errs := make(chan error, runs)
	start := time.Now()
	for i := range runs {
		k := testKey(t, near)
		wg.Go(func() {
			ctx := context.Background()
			_, lease, err := s.Acquire(ctx, k)
			if err != nil {
				errs <- fmt.Errorf("run %d: %w", i, err)
				return
			}
			msg := runtime.Message{Role: runtime.RoleUser, Content: fmt.Sprint("turn of run ", i)}
			if _, err := s.Save(ctx, k, lease, runtime.Write{Messages: []runtime.Message{msg}, Release: true}); err != nil {
				errs <- fmt.Errorf("run %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	close(errs)
	failed := 0
	for err := range errs {
		if failed++; failed <= 3 {
			t.Error(err)
		}
	}
	if failed > 0 {
		t.Fatalf("%d of %d runs failed", failed, runs)
	}
	if most := hook.most.Load(); most > 1 {
		t.Errorf("%d pipelines in flight at once, want at most the pool's 1", most)
	}
	// Two round trips a run (acquire; save and release) if none shared.
	p, cmds := hook.sent()
	if p >= runs {
		t.Errorf("%d pipelines for %d runs' %d commands, want far fewer than two a run", p, runs, cmds)
	}
	t.Logf("%d runs in %v: %d pipelines of %d commands", runs, took.Round(time.Millisecond), p, cmds)
}

// queued waits until n callers wait on b.
func queued(t *testing.T, b *batcher, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b.mu.Lock()
		got := len(b.waiting)
		b.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d callers wait, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// With its one pipeline in flight, the batcher sends every caller that
// waits in the next pipeline, in the order they came, each with its own
// reply; a caller whose context ends while it waits returns at once and
// its command is not sent.
func TestBatcherSendsTheWaitingTogether(t *testing.T) {
	o, err := universalOptions(testRedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	client := redis.NewUniversalClient(o)
	t.Cleanup(func() { _ = client.Close() })
	hook := &pipelines{hold: make(chan struct{}), held: make(chan struct{})}
	client.AddHook(hook)
	b := newBatcher(client, 2*time.Second, 1)

	echo := func(ctx context.Context, msg string) (string, error) {
		var cmd *redis.StringCmd
		alone := func() {
			_, _ = client.Pipelined(ctx, func(p redis.Pipeliner) error { cmd = p.Echo(ctx, msg); return nil })
		}
		if err := b.do(ctx, alone, func(p redis.Pipeliner) { cmd = p.Echo(ctx, msg) }); err != nil {
			return "", err
		}
		return cmd.Result()
	}
	type answer struct {
		msg, got string
		err      error
	}
	answers := make(chan answer, 10)
	ask := func(ctx context.Context, msg string) {
		got, err := echo(ctx, msg)
		answers <- answer{msg, got, err}
	}

	go ask(context.Background(), "first")
	<-hook.held
	for i := range 5 {
		go ask(context.Background(), fmt.Sprint("waiting ", i))
		queued(t, b, i+1)
	}
	gone, cancel := context.WithCancel(context.Background())
	go ask(gone, "gone")
	queued(t, b, 6)
	cancel()
	// The caller that gave up is answered while the first pipeline is
	// still held.
	if a := <-answers; a.msg != "gone" || !errors.Is(a.err, context.Canceled) {
		t.Fatalf("first answer: %+v, want the cancelled caller's context.Canceled", a)
	}
	close(hook.hold)
	for range 6 {
		a := <-answers
		if a.err != nil || a.got != a.msg {
			t.Errorf("%q answered %q, %v", a.msg, a.got, a.err)
		}
	}
	b.wait()
	hook.mu.Lock()
	defer hook.mu.Unlock()
	if fmt.Sprint(hook.sizes) != "[1 5]" {
		t.Errorf("pipelines of %v commands, want [1 5]: the first alone, then the five still waiting", hook.sizes)
	}
}
