package cache

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/ratelimit"
)

// limiter is what both backends' limiters do (the gateway's Limiter).
type limiter interface {
	Admit(ctx context.Context, principal string, l graphs.Limits) (ratelimit.State, error)
	Charge(ctx context.Context, principal string, l graphs.Limits, tokens int64) error
}

// limiterPair returns two limiters that share their counts, as two
// gateways on one store do (the memory backend has only one process).
type limiterPair func(t testing.TB) (limiter, limiter)

func memoryPair(testing.TB) (limiter, limiter) {
	m := NewMemoryLimiter()
	return m, m
}

// redisPair opens two stores, each with its own connection pool.
func redisPair(t testing.TB) (limiter, limiter) {
	url := testRedisURL(t)
	var out [2]limiter
	for i := range out {
		s, err := NewRedis(context.Background(), Options{URL: url})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		out[i] = s.Limiter()
	}
	return out[0], out[1]
}

func TestLimiters(t *testing.T) {
	for name, pair := range map[string]limiterPair{"memory": memoryPair, "redis": redisPair} {
		t.Run(name, func(t *testing.T) { testLimiter(t, pair) })
	}
}

func testLimiter(t *testing.T, pair limiterPair) {
	ctx := context.Background()
	t.Run("requests shared", func(t *testing.T) {
		a, b := pair(t)
		who := "rl-test-" + rand.Text()
		l := graphs.Limits{RequestsPerMinute: 4}
		for i := range 4 {
			lim := a
			if i%2 == 1 {
				lim = b
			}
			st, err := lim.Admit(ctx, who, l)
			if err != nil || !st.Allowed || st.Requests.Remaining != int64(3-i) || st.Requests.Limit != 4 {
				t.Fatalf("request %d: %+v, %v", i, st, err)
			}
		}
		st, err := b.Admit(ctx, who, l)
		if err != nil || st.Allowed || st.Exceeded != "requests" || st.RetryAfter <= 0 || st.RetryAfter > 15*time.Second {
			t.Fatalf("the fifth request: %+v, %v; want refused for about 15s", st, err)
		}
		// Another principal is counted apart.
		if st, err := a.Admit(ctx, who+"-other", l); err != nil || !st.Allowed {
			t.Errorf("another principal: %+v, %v", st, err)
		}
	})
	t.Run("tokens charged after the run", func(t *testing.T) {
		a, b := pair(t)
		who := "rl-test-" + rand.Text()
		l := graphs.Limits{RequestsPerMinute: 100, TokensPerMinute: 50}
		if st, err := a.Admit(ctx, who, l); err != nil || !st.Allowed || st.Tokens.Remaining != 50 {
			t.Fatalf("first request: %+v, %v", st, err)
		}
		if err := a.Charge(ctx, who, l, 60); err != nil {
			t.Fatal(err)
		}
		st, err := b.Admit(ctx, who, l)
		if err != nil || st.Allowed || st.Exceeded != "tokens" || st.Tokens.Remaining != 0 {
			t.Fatalf("after 60 of 50 tokens: %+v, %v; want refused on tokens", st, err)
		}
		// 11 tokens at 50 a minute: about 13 s.
		if st.RetryAfter < 12*time.Second || st.RetryAfter > 14*time.Second {
			t.Errorf("retry after %v, want about 13.2s", st.RetryAfter)
		}
		// A refused request takes no request.
		if st.Requests.Remaining != 99 {
			t.Errorf("requests remaining %d after one admitted and one refused, want 99", st.Requests.Remaining)
		}
	})
}

// BenchmarkLimiter is what a limited key adds to each request: one Admit,
// and one Charge when the key has token limits.
func BenchmarkLimiter(b *testing.B) {
	l := graphs.Limits{RequestsPerMinute: 1 << 40, TokensPerMinute: 1 << 40, TokensPerDay: 1 << 40}
	for name, pair := range map[string]limiterPair{"memory": memoryPair, "redis": redisPair} {
		b.Run(name+"/admit", func(b *testing.B) {
			lim, _ := pair(b)
			who := "rl-bench-" + rand.Text()
			for b.Loop() {
				if _, err := lim.Admit(b.Context(), who, l); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/admit+charge", func(b *testing.B) {
			lim, _ := pair(b)
			who := "rl-bench-" + rand.Text()
			for b.Loop() {
				if _, err := lim.Admit(b.Context(), who, l); err != nil {
					b.Fatal(err)
				}
				if err := lim.Charge(b.Context(), who, l, 15); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
