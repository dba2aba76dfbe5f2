package cache

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	goruntime "runtime"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The URL schemes for Sentinel and Cluster; redis, rediss and unix are
// go-redis's own (see NewRedis).
const (
	schemeSentinel    = "redis-sentinel"
	schemeSentinelTLS = "rediss-sentinel"
	schemeCluster     = "redis-cluster"
	schemeClusterTLS  = "rediss-cluster"
)

// universalOptions reads a store URL into go-redis universal options, which
// pick a single-node, Sentinel or Cluster client.
func universalOptions(raw string) (*redis.UniversalOptions, error) {
	scheme, err := urlScheme(raw)
	if err != nil {
		return nil, err
	}
	switch scheme {
	case "redis", "rediss", "unix":
		o, err := redis.ParseURL(raw)
		if err != nil {
			// net/url's error quotes the whole URL, password and all.
			if ue := (*url.Error)(nil); errors.As(err, &ue) {
				err = ue.Err
			}
			return nil, fmt.Errorf("url %s: %w", redactURL(raw), err)
		}
		if o.DB < 0 {
			// go-redis takes a negative database for none, and would
			// use database 0.
			return nil, fmt.Errorf("url %s: invalid database number %d", redactURL(raw), o.DB)
		}
		return simpleOptions(o), nil
	case schemeSentinel, schemeSentinelTLS, schemeCluster, schemeClusterTLS:
		uo, err := multiHostOptions(scheme, raw)
		if err != nil {
			return nil, fmt.Errorf("url %s: %w", redactURL(raw), err)
		}
		return uo, nil
	default:
		return nil, fmt.Errorf("url %s: unknown scheme %q", redactURL(raw), scheme)
	}
}

// simpleOptions carries what ParseURL read into universal options.
func simpleOptions(o *redis.Options) *redis.UniversalOptions {
	// A unix socket's Addr is its path, which go-redis tells by its slash.
	return &redis.UniversalOptions{
		Addrs:                 []string{o.Addr},
		DB:                    o.DB,
		Username:              o.Username,
		Password:              o.Password,
		TLSConfig:             o.TLSConfig,
		Protocol:              o.Protocol,
		ClientName:            o.ClientName,
		MaxRetries:            o.MaxRetries,
		MinRetryBackoff:       o.MinRetryBackoff,
		MaxRetryBackoff:       o.MaxRetryBackoff,
		DialTimeout:           o.DialTimeout,
		ReadTimeout:           o.ReadTimeout,
		WriteTimeout:          o.WriteTimeout,
		ContextTimeoutEnabled: o.ContextTimeoutEnabled,
		PoolFIFO:              o.PoolFIFO,
		PoolSize:              o.PoolSize,
		PoolTimeout:           o.PoolTimeout,
		MinIdleConns:          o.MinIdleConns,
		MaxIdleConns:          o.MaxIdleConns,
		MaxActiveConns:        o.MaxActiveConns,
		MaxConcurrentDials:    o.MaxConcurrentDials,
		ConnMaxIdleTime:       o.ConnMaxIdleTime,
		ConnMaxLifetime:       o.ConnMaxLifetime,
		ConnMaxLifetimeJitter: o.ConnMaxLifetimeJitter,
		DisableIdentity:       o.DisableIdentity,
		IdentitySuffix:        o.IdentitySuffix,
	}
}

// multiHostOptions reads a Sentinel or Cluster URL. The host list is cut out
// by hand: net/url rejects a list of bracketed IPv6 addresses.
func multiHostOptions(scheme, raw string) (*redis.UniversalOptions, error) {
	rest := raw[len(scheme)+len("://"):]
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	authority := rest[:end]
	hosts := authority
	userinfo := ""
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		userinfo, hosts = authority[:at+1], authority[at+1:]
	}
	// Parse the URL with a placeholder host to read userinfo, path and query.
	u, err := url.Parse(scheme + "://" + userinfo + "host" + rest[end:])
	if err != nil {
		return nil, err
	}
	sentinel := scheme == schemeSentinel || scheme == schemeSentinelTLS
	defaultPort := "6379"
	if sentinel {
		defaultPort = "26379"
	}
	uo := &redis.UniversalOptions{}
	for h := range strings.SplitSeq(hosts, ",") {
		addr, err := hostPort(h, defaultPort)
		if err != nil {
			return nil, err
		}
		uo.Addrs = append(uo.Addrs, addr)
	}
	if u.User != nil {
		uo.Username = u.User.Username()
		uo.Password, _ = u.User.Password()
	}
	if scheme == schemeSentinelTLS || scheme == schemeClusterTLS {
		// No ServerName: crypto/tls takes it from each address dialled.
		uo.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	db := strings.Trim(u.Path, "/")
	switch {
	case db != "" && !sentinel:
		return nil, errors.New("a cluster has no databases: drop the path")
	case db != "":
		if uo.DB, err = strconv.Atoi(db); err != nil || uo.DB < 0 {
			return nil, fmt.Errorf("invalid database number %q", db)
		}
	}
	if err := queryOptions(uo, u.Query(), sentinel); err != nil {
		return nil, err
	}
	if sentinel && uo.MasterName == "" {
		return nil, errors.New("a sentinel url needs ?master=<name>")
	}
	// Cluster mode even for a single seed address.
	uo.IsClusterMode = !sentinel
	return uo, nil
}

// hostPort validates one host of a list and adds the default port.
func hostPort(h, defaultPort string) (string, error) {
	if h == "" {
		return "", errors.New("empty host in host list")
	}
	host, port, err := net.SplitHostPort(h)
	if err != nil { // no port, or no valid host
		host, port = h, defaultPort
		if len(h) > 2 && h[0] == '[' && h[len(h)-1] == ']' {
			host = h[1 : len(h)-1] // a bracketed IPv6 address
		} else if strings.ContainsAny(h, "[]:") {
			return "", fmt.Errorf("invalid host %q", h)
		}
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || host == "" {
		return "", fmt.Errorf("invalid host %q", h)
	}
	return net.JoinHostPort(host, port), nil
}

// queryOptions applies a Sentinel or Cluster URL's options; an unknown one is
// an error, so that a typo does not pass silently.
func queryOptions(uo *redis.UniversalOptions, q url.Values, sentinel bool) error {
	for name, vs := range q {
		v := vs[len(vs)-1]
		switch {
		case name == "master" && sentinel:
			uo.MasterName = v
		case name == "sentinel_username" && sentinel:
			uo.SentinelUsername = v
		case name == "sentinel_password" && sentinel:
			uo.SentinelPassword = v
		case name == "client_name":
			uo.ClientName = v
		case name == "pool_size":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return fmt.Errorf("invalid pool_size %q", v)
			}
			uo.PoolSize = n
		default:
			return fmt.Errorf("unknown option %q", name)
		}
	}
	return nil
}

// defaultPoolSize is the most connections a store keeps to one Redis
// server when its URL sets no pool_size: 100 per CPU (GOMAXPROCS).
//
// A run holds a connection only for each round trip (loading and locking
// its session, saving a step, renewing the lease), never while it streams;
// but thousands of streams opened within seconds on a busy machine queued
// for go-redis's default of 10 per CPU past the store timeout, and failed
// with store_unavailable (issue 22). Connections are dialled only when
// that many commands are in flight at once, and close after 30 idle
// minutes; each holds go-redis's two 32 KB buffers.
func defaultPoolSize() int { return 100 * goruntime.GOMAXPROCS(0) }

// tune fits the client to the store timeout, unless the URL set a value:
// dialling, reading and writing each end within it, go-redis honours the
// context deadline, and retries are few, so that a dead Redis fails fast.
// The pool redials on later calls, so the store recovers when Redis does.
func tune(uo *redis.UniversalOptions, timeout time.Duration) {
	if uo.DialTimeout == 0 {
		uo.DialTimeout = timeout
	}
	if uo.ReadTimeout == 0 {
		uo.ReadTimeout = timeout
	}
	if uo.WriteTimeout == 0 {
		uo.WriteTimeout = timeout
	}
	if uo.PoolTimeout == 0 {
		uo.PoolTimeout = timeout
	}
	if uo.MaxRetries == 0 {
		uo.MaxRetries = 2
	}
	if uo.PoolSize == 0 {
		uo.PoolSize = defaultPoolSize()
	}
	// One dial attempt per command try: MaxRetries already retries, and
	// go-redis's default of five attempts would stretch a refused connection.
	if uo.DialerRetries == 0 {
		uo.DialerRetries = 1
	}
	uo.ContextTimeoutEnabled = true
}
