package cache

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-ai/switchboard/internal/syncbuf"
	"github.com/switchboard-ai/switchboard/internal/testenv"
	"github.com/switchboard-ai/switchboard/runtime"
)

// storeOp calls one Store method.
type storeOp struct {
	name string
	call func(ctx context.Context, s runtime.Store) error
}

// storeOps returns a call of every Store method.
func storeOps() []storeOp {
	failKey := runtime.SessionKey{Principal: "p", ID: "s"}
	failLease := runtime.Lease{Token: "t", TTL: time.Second}
	return []storeOp{
		{"Acquire", func(ctx context.Context, s runtime.Store) error { _, _, err := s.Acquire(ctx, failKey); return err }},
		{"Save", func(ctx context.Context, s runtime.Store) error {
			_, err := s.Save(ctx, failKey, failLease, runtime.Write{Messages: []runtime.Message{{Role: "user", Content: "hi"}}})
			return err
		}},
		{"Renew", func(ctx context.Context, s runtime.Store) error { return s.Renew(ctx, failKey, failLease) }},
		{"Release", func(ctx context.Context, s runtime.Store) error { return s.Release(ctx, failKey, failLease) }},
		{"Load", func(ctx context.Context, s runtime.Store) error { _, err := s.Load(ctx, failKey); return err }},
		{"Delete", func(ctx context.Context, s runtime.Store) error { return s.Delete(ctx, failKey) }},
		{"Ping", func(ctx context.Context, s runtime.Store) error { return s.Ping(ctx) }},
	}
}

// closedAddr returns an address nothing listens on.
func closedAddr(t *testing.T) string { return testenv.RefusingAddr(t) }

// silentServer accepts connections and never answers, like a Redis that
// hangs; it returns its address.
func silentServer(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				_, _ = io.Copy(io.Discard, c) // until the client hangs up
			})
		}
	})
	t.Cleanup(func() { l.Close(); wg.Wait() })
	return l.Addr().String()
}

func TestRedisUnavailable(t *testing.T) {
	const timeout = 300 * time.Millisecond
	servers := []struct {
		name string
		addr func(t *testing.T) string
	}{
		{"refused", closedAddr},
		{"silent", silentServer},
	}
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			s := openRedis(t, Options{URL: "redis://" + srv.addr(t), Timeout: timeout})
			for _, op := range storeOps() {
				start := time.Now()
				err := op.call(context.Background(), s)
				took := time.Since(start)
				if !errors.Is(err, runtime.ErrStoreUnavailable) {
					t.Errorf("%s: error %v, want ErrStoreUnavailable", op.name, err)
				}
				// The bound is generous: the point is that no call waits for
				// go-redis's own defaults (5s dials, several retries).
				if took > 3*timeout {
					t.Errorf("%s took %v, want about the store timeout %v", op.name, took, timeout)
				}
			}
		})
	}
}

func TestRedisCallerCancel(t *testing.T) {
	s := openRedis(t, Options{URL: "redis://" + silentServer(t), Timeout: 5 * time.Second})
	for _, op := range storeOps() {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		err := op.call(ctx, s)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, runtime.ErrStoreUnavailable) {
			t.Errorf("%s with the caller's deadline passed: error %v, want context.DeadlineExceeded only", op.name, err)
		}
		ctx, cancel = context.WithCancel(context.Background())
		cancel()
		if err := op.call(ctx, s); !errors.Is(err, context.Canceled) || errors.Is(err, runtime.ErrStoreUnavailable) {
			t.Errorf("%s with the caller gone: error %v, want context.Canceled only", op.name, err)
		}
	}
}

// proxy forwards TCP connections to a target until stopped, so that a test
// can take "Redis" away and bring it back on the same address.
type proxy struct {
	target, addr string
	l            net.Listener
	mu           sync.Mutex
	conns        []net.Conn
	wg           sync.WaitGroup
}

func (p *proxy) start(t *testing.T) {
	l, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatalf("proxy listen: %v", err)
	}
	p.l, p.addr = l, l.Addr().String()
	p.wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			p.wg.Go(func() { _, _ = io.Copy(up, c); up.Close() })
			p.wg.Go(func() { _, _ = io.Copy(c, up); c.Close() })
		}
	})
}

func (p *proxy) stop() {
	p.l.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}

func TestRedisRecoversWhenRedisReturns(t *testing.T) {
	target := strings.TrimPrefix(testRedisURL(t), "redis://")
	target, _, _ = strings.Cut(target, "/")
	p := &proxy{target: target, addr: "127.0.0.1:0"}
	p.start(t)
	s := openRedis(t, Options{URL: "redis://" + p.addr, Timeout: 300 * time.Millisecond})
	k := testKey(t, openRedis(t, Options{})) // cleaned up past the proxy
	if _, err := turn(t, s, k, runtime.Write{Messages: []runtime.Message{{Role: "user", Content: "before"}}}); err != nil {
		t.Fatalf("turn: %v", err)
	}

	p.stop()
	// Enough failed dials that go-redis stops dialling and probes instead.
	for range 10 {
		if err := s.Ping(t.Context()); !errors.Is(err, runtime.ErrStoreUnavailable) {
			t.Fatalf("Ping with Redis gone: %v, want ErrStoreUnavailable", err)
		}
	}

	p.start(t)
	defer p.stop()
	deadline := time.Now().Add(10 * time.Second)
	for s.Ping(t.Context()) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the store did not reconnect after Redis came back")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := turn(t, s, k, runtime.Write{Messages: []runtime.Message{{Role: "user", Content: "after"}}}); err != nil {
		t.Fatalf("turn after Redis came back: %v", err)
	}
	got, err := s.Load(t.Context(), k)
	if err != nil || len(got.Messages) != 2 || got.Version != 2 {
		t.Fatalf("Load = %+v, %v; want both turns", got, err)
	}
}

// go-redis's own complaints (its pool cannot dial) reach the store's log
// in the log's format, not standard error as plain text among JSON lines.
func TestRedisLogsThroughTheStoresLog(t *testing.T) {
	var out syncbuf.Buffer
	s := openRedis(t, Options{URL: "redis://" + closedAddr(t), Timeout: 300 * time.Millisecond,
		Log: slog.New(slog.NewJSONHandler(&out, nil))})
	if _, err := s.Load(context.Background(), runtime.SessionKey{ID: "x"}); !errors.Is(err, runtime.ErrStoreUnavailable) {
		t.Fatalf("load: %v", err)
	}
	var line struct {
		Level, Msg, Detail string
	}
	first, _, _ := strings.Cut(out.String(), "\n")
	if err := json.Unmarshal([]byte(first), &line); err != nil || line.Level != "WARN" || line.Msg != "redis client" || !strings.Contains(line.Detail, "connection refused") {
		t.Errorf("log %q (%v), want go-redis's dial failure as a JSON warning", out.String(), err)
	}
}
