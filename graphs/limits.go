package graphs

import "strings"

// compileWaitReplicas applies store.wait_replicas, which only a Redis
// store can honour: a memory store has no replicas to wait for.
func compileWaitReplicas(r *rawStore, s *Store, p *problems) {
	if r.WaitReplicas == nil {
		return
	}
	switch n := *r.WaitReplicas; {
	case n < 0:
		p.addf("store.wait_replicas: must be 0 or more, got %d", n)
	case n > 0 && (s.URL == DefaultStoreURL || strings.HasPrefix(strings.ToLower(s.URL), "memory:")):
		p.addf("store.wait_replicas: %d replicas asked for, but the memory store has none (use a Redis store.url)", n)
	default:
		s.WaitReplicas = n
	}
}

// rawLimits is an API key's `limits:`.
type rawLimits struct {
	// RequestsPerMinute bounds the key's /v1 requests; default unlimited.
	RequestsPerMinute *int64 `yaml:"requests_per_minute"`
	// TokensPerMinute bounds the tokens the key's runs use; default
	// unlimited.
	TokensPerMinute *int64 `yaml:"tokens_per_minute"`
	// TokensPerDay bounds the same over a day; default unlimited.
	TokensPerDay *int64 `yaml:"tokens_per_day"`
}

// Limits are an API key's rate limits, counted over a sliding window (a
// token bucket that refills continuously) by every gateway on one store.
// Zero is unlimited.
type Limits struct {
	RequestsPerMinute int64
	TokensPerMinute   int64
	TokensPerDay      int64
}

// Any reports whether l limits anything.
func (l Limits) Any() bool {
	return l.RequestsPerMinute > 0 || l.TokensPerMinute > 0 || l.TokensPerDay > 0
}

// compileLimits checks a key's limits; each given must be positive.
func compileLimits(r *rawLimits, path string, p *problems) Limits {
	var l Limits
	if r == nil {
		return l
	}
	for _, f := range []struct {
		name string
		in   *int64
		out  *int64
	}{
		{"requests_per_minute", r.RequestsPerMinute, &l.RequestsPerMinute},
		{"tokens_per_minute", r.TokensPerMinute, &l.TokensPerMinute},
		{"tokens_per_day", r.TokensPerDay, &l.TokensPerDay},
	} {
		if f.in == nil {
			continue
		}
		if *f.in <= 0 {
			p.addf("%s.limits.%s: must be a positive number, got %d (leave it out for no limit)", path, f.name, *f.in)
			continue
		}
		*f.out = *f.in
	}
	return l
}
