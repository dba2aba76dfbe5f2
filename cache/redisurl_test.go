package cache

import (
	goruntime "runtime"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"
)

func TestUniversalOptions(t *testing.T) {
	type want struct {
		Addrs                              []string
		DB                                 int
		Username, Password                 string
		MasterName                         string
		SentinelUsername, SentinelPassword string
		ClientName                         string
		PoolSize                           int
		Cluster, TLS                       bool
		DialTimeout                        time.Duration
	}
	tests := []struct {
		url  string
		want want
	}{
		{"redis://127.0.0.1:6379/0", want{Addrs: []string{"127.0.0.1:6379"}}},
		{"redis://:secret@cache.internal/3?dial_timeout=1s", want{Addrs: []string{"cache.internal:6379"}, DB: 3, Password: "secret", DialTimeout: time.Second}},
		{"rediss://user:p%40ss@cache.internal:6380", want{Addrs: []string{"cache.internal:6380"}, Username: "user", Password: "p@ss", TLS: true}},
		{"unix:///run/redis.sock?db=2", want{Addrs: []string{"/run/redis.sock"}, DB: 2}},
		{"redis-sentinel://:pw@s1:26379,s2,[::1]:26380/1?master=mymaster&sentinel_password=spw",
			want{Addrs: []string{"s1:26379", "s2:26379", "[::1]:26380"}, DB: 1, Password: "pw", MasterName: "mymaster", SentinelPassword: "spw"}},
		{"rediss-sentinel://s1?master=m&sentinel_username=su&client_name=sb",
			want{Addrs: []string{"s1:26379"}, MasterName: "m", SentinelUsername: "su", ClientName: "sb", TLS: true}},
		{"redis-cluster://host1:7000,host2:7001", want{Addrs: []string{"host1:7000", "host2:7001"}, Cluster: true}},
		{"redis-cluster://u:pw@[::1]:7000,[::1]:7001/?pool_size=20", want{Addrs: []string{"[::1]:7000", "[::1]:7001"}, Username: "u", Password: "pw", PoolSize: 20, Cluster: true}},
		{"rediss-cluster://one", want{Addrs: []string{"one:6379"}, Cluster: true, TLS: true}},
	}
	for _, tc := range tests {
		uo, err := universalOptions(tc.url)
		if err != nil {
			t.Errorf("universalOptions(%q): %v", tc.url, err)
			continue
		}
		got := want{
			Addrs: uo.Addrs, DB: uo.DB, Username: uo.Username, Password: uo.Password,
			MasterName: uo.MasterName, SentinelUsername: uo.SentinelUsername, SentinelPassword: uo.SentinelPassword,
			ClientName: uo.ClientName, PoolSize: uo.PoolSize, Cluster: uo.IsClusterMode, TLS: uo.TLSConfig != nil,
			DialTimeout: uo.DialTimeout,
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("universalOptions(%q) mismatch (-want +got):\n%s", tc.url, diff)
		}
	}
}

func TestUniversalOptionsErrors(t *testing.T) {
	for _, u := range []string{
		"127.0.0.1:6379",
		"http://127.0.0.1:6379",
		"redis://127.0.0.1:6379/x",
		"redis://127.0.0.1:6379?nonsense=1",
		"redis-sentinel://s1,s2",                    // no master
		"redis-sentinel://s1/x?master=m",            // bad db
		"redis-sentinel://s1?master=m&pool_size=0",  // bad pool size
		"redis-cluster://h1,h2/1",                   // clusters have no databases
		"redis-cluster://h1,,h2",                    // empty host
		"redis-cluster://h1:port",                   // bad port
		"redis-cluster://::1",                       // IPv6 without brackets
		"redis-cluster://h1?master=m",               // sentinel option
		"redis-cluster://:secret@h1?dial_timeout=1", // unknown option
	} {
		if _, err := universalOptions(u); err == nil {
			t.Errorf("universalOptions(%q): no error", u)
		} else if containsSecret(err.Error()) {
			t.Errorf("universalOptions(%q): error %q shows the password", u, err)
		}
	}
}

func containsSecret(s string) bool {
	for i := 0; i+6 <= len(s); i++ {
		if s[i:i+6] == "secret" {
			return true
		}
	}
	return false
}

func TestTune(t *testing.T) {
	uo := &redis.UniversalOptions{ReadTimeout: time.Second}
	tune(uo, 2*time.Second)
	got := []any{uo.DialTimeout, uo.ReadTimeout, uo.WriteTimeout, uo.PoolTimeout, uo.MaxRetries, uo.DialerRetries, uo.ContextTimeoutEnabled, uo.PoolSize}
	want := []any{2 * time.Second, time.Second, 2 * time.Second, 2 * time.Second, 2, 1, true, 100 * goruntime.GOMAXPROCS(0)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tune mismatch (-want +got):\n%s", diff)
	}
}

// TestPoolSize checks the pool's size: the URL's pool_size when it sets
// one, in every kind of URL, else 100 per CPU rather than go-redis's 10,
// which thousands of streams opening at once outran (issue 22).
func TestPoolSize(t *testing.T) {
	for _, c := range []struct {
		url  string
		want int
	}{
		{"redis://127.0.0.1:6379/0", 100 * goruntime.GOMAXPROCS(0)},
		{"redis://127.0.0.1:6379/0?pool_size=7", 7},
		{"redis-cluster://127.0.0.1:7000?pool_size=9", 9},
		{"redis-sentinel://127.0.0.1:26379?master=m", 100 * goruntime.GOMAXPROCS(0)},
	} {
		uo, err := universalOptions(c.url)
		if err != nil {
			t.Fatalf("%s: %v", c.url, err)
		}
		tune(uo, time.Second)
		if uo.PoolSize != c.want {
			t.Errorf("%s: pool size %d, want %d", c.url, uo.PoolSize, c.want)
		}
	}
}

func TestNewRedisClientKind(t *testing.T) {
	tests := []struct {
		url  string
		kind string
	}{
		{"redis://127.0.0.1:6379", "*redis.Client"},
		{"redis-sentinel://127.0.0.1:26379?master=m", "*redis.Client"},
		{"redis-cluster://127.0.0.1:7000", "*redis.ClusterClient"},
	}
	for _, tc := range tests {
		s, err := NewRedis(t.Context(), Options{URL: tc.url})
		if err != nil {
			t.Fatalf("NewRedis(%q): %v", tc.url, err)
		}
		kind := ""
		switch s.client.(type) {
		case *redis.Client:
			kind = "*redis.Client"
		case *redis.ClusterClient:
			kind = "*redis.ClusterClient"
		}
		if kind != tc.kind {
			t.Errorf("NewRedis(%q) client is %T, want %s", tc.url, s.client, tc.kind)
		}
		s.Close()
	}
}
