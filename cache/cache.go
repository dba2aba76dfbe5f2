// Package cache holds Switchboard's session stores: an in-memory store for a
// single gateway (memory://) and a Redis store that several gateways share
// (redis://, rediss://, redis-sentinel://, redis-cluster://; see NewRedis).
// Both satisfy runtime.Store and pass the shared suite in cache/storetest.
package cache

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/runtime"
)

// Options configures a store. Zero fields take the documented defaults.
type Options struct {
	// URL selects the backend by scheme: memory:// (default, also for an
	// empty URL) or a Redis URL as described on NewRedis.
	URL string
	// SessionTTL is how long a session lives after its last write; every
	// write refreshes it. Default 24h.
	SessionTTL time.Duration
	// Timeout bounds one store operation; past it the operation fails with
	// runtime.ErrStoreUnavailable. Default 2s.
	Timeout time.Duration
	// LockLease is how long a run holds a session without renewing its
	// lease, so a dead gateway blocks a session for at most this long.
	// Default 30s.
	LockLease time.Duration
	// MaxSessionBytes bounds a stored transcript, counted in bytes of its
	// messages' JSON: a save that would pass it fails with
	// runtime.ErrSessionTooLarge and writes nothing. Default 16 MiB.
	MaxSessionBytes int64
	// CacheEntries bounds the Redis store's per-process transcript cache,
	// in sessions (least recently used goes first). Default 1024; negative
	// disables the cache. The memory store ignores it.
	CacheEntries int
	// WaitReplicas makes the Redis store's Save wait until this many
	// replicas have the write (WAIT, in the same round trip), so that a
	// failover loses no save that was acknowledged. A save that fewer
	// replicas confirm within Timeout fails with ErrStoreUnavailable.
	// Default 0: no waiting. The memory store ignores it.
	WaitReplicas int
	// TracerProvider, when set, makes the Redis store trace every command
	// (never its arguments, which hold transcripts). Nil: no tracing.
	TracerProvider trace.TracerProvider
	// Log, when set, takes go-redis's own log lines (a pool that cannot
	// dial, a sentinel that changed its master), as warnings; unset, they
	// go to standard error in go-redis's format.
	Log *slog.Logger
}

// defaultCacheEntries is the Redis store's transcript cache size; the
// other defaults are the config's (graphs/defaults.go).
const defaultCacheEntries = 1024

// init applies the defaults, the same as the config's.
func (o *Options) init() {
	if o.URL == "" {
		o.URL = graphs.DefaultStoreURL
	}
	if o.SessionTTL <= 0 {
		o.SessionTTL = graphs.DefaultSessionTTL
	}
	if o.Timeout <= 0 {
		o.Timeout = graphs.DefaultStoreTimeout
	}
	if o.LockLease <= 0 {
		o.LockLease = graphs.DefaultLockLease
	}
	if o.CacheEntries == 0 {
		o.CacheEntries = defaultCacheEntries
	}
	if o.MaxSessionBytes <= 0 {
		o.MaxSessionBytes = graphs.DefaultMaxSessionBytes
	}
}

// Open opens the store that opts.URL names: the memory store for memory://
// (or an empty URL), the Redis store for the schemes NewRedis accepts.
// Any other scheme is an error.
func Open(ctx context.Context, opts Options) (runtime.Store, error) {
	opts.init()
	scheme, err := urlScheme(opts.URL)
	if err != nil {
		return nil, err
	}
	switch scheme {
	case "memory":
		return NewMemory(opts), nil
	case "redis", "rediss", "unix",
		schemeSentinel, schemeSentinelTLS, schemeCluster, schemeClusterTLS:
		return NewRedis(ctx, opts)
	default:
		return nil, fmt.Errorf("open store: unknown url scheme %q (want memory, redis, rediss, unix, %s, %s, %s or %s)",
			scheme, schemeSentinel, schemeSentinelTLS, schemeCluster, schemeClusterTLS)
	}
}

// CheckURL reports whether Open could open the store raw names, without
// connecting to it: its scheme and, for Redis, the URL's form and options
// (a sentinel URL needs ?master=). An empty URL is the default store. Its
// error names the URL with any password hidden; config loading reports it
// as a problem of store.url, so that validate and a reload catch it too.
func CheckURL(raw string) error {
	if raw == "" {
		return nil
	}
	scheme, err := urlScheme(raw)
	if err != nil {
		return err
	}
	if scheme == "memory" {
		return nil
	}
	_, err = universalOptions(raw)
	return err
}

// urlScheme returns raw's scheme, lowercased. It does not parse the rest:
// multi-host URLs are not always valid for net/url.
func urlScheme(raw string) (string, error) {
	scheme, _, ok := strings.Cut(raw, "://")
	if !ok || scheme == "" {
		return "", fmt.Errorf("open store: url %q has no scheme", redactURL(raw))
	}
	return strings.ToLower(scheme), nil
}

// redactURL hides a password so that errors can name the URL.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		// Do not echo what may hold a password in a shape we cannot read.
		if scheme, _, ok := strings.Cut(raw, "://"); ok {
			return scheme + "://..."
		}
		return "..."
	}
	return u.Redacted()
}
