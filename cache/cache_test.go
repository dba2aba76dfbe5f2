package cache

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestOpen(t *testing.T) {
	tests := []struct {
		url     string
		want    string // the store's type, or an error's text
		wantErr bool
	}{
		{"", "*cache.Memory", false},
		{"memory://", "*cache.Memory", false},
		{"MEMORY://", "*cache.Memory", false},
		{"redis://127.0.0.1:6379/0", "*cache.Redis", false},
		{"redis-cluster://127.0.0.1:7000,127.0.0.1:7001", "*cache.Redis", false},
		{"postgres://db", `unknown url scheme "postgres"`, true},
		{"127.0.0.1:6379", "no scheme", true},
		{"redis://:secret@h/x", "invalid database number", true},
	}
	for _, tc := range tests {
		s, err := Open(t.Context(), Options{URL: tc.url})
		if tc.wantErr {
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Open(%q) error = %v, want one saying %q", tc.url, err, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Errorf("Open(%q) error %q shows the password", tc.url, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Open(%q): %v", tc.url, err)
			continue
		}
		if got := typeName(s); got != tc.want {
			t.Errorf("Open(%q) = %s, want %s", tc.url, got, tc.want)
		}
		s.Close()
	}
}

func typeName(v any) string {
	switch v.(type) {
	case *Memory:
		return "*cache.Memory"
	case *Redis:
		return "*cache.Redis"
	}
	return "?"
}

func TestOptionsDefaults(t *testing.T) {
	var o Options
	o.init()
	want := Options{URL: "memory://", SessionTTL: 24 * time.Hour, Timeout: 2 * time.Second, LockLease: 30 * time.Second, CacheEntries: 1024, MaxSessionBytes: 16 << 20}
	if diff := cmp.Diff(want, o); diff != "" {
		t.Errorf("defaults mismatch (-want +got):\n%s", diff)
	}
	set := Options{URL: "redis://h", SessionTTL: time.Hour, Timeout: time.Second, LockLease: time.Minute, CacheEntries: -1, MaxSessionBytes: 1 << 20}
	got := set
	got.init()
	if diff := cmp.Diff(set, got); diff != "" {
		t.Errorf("init changed set options (-want +got):\n%s", diff)
	}
}

// CheckURL tells, without connecting, whether Open could open a store, and
// its error never shows a password.
func TestCheckURL(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"", ""},
		{"memory://", ""},
		{"redis://:s3cr3tpw@127.0.0.1:6379/0", ""},
		{"redis-sentinel://:s3cr3tpw@s1,s2/0?master=m", ""},
		{"redis://:s3cr3tpw@127.0.0.1:notaport/0", "invalid port"},
		{"redis://:s3cr3tpw@127.0.0.1:6379/-1", "invalid database number -1"},
		{"redis-sentinel://:s3cr3tpw@s1,s2/0", "needs ?master="},
		{"foo://bar", `unknown scheme "foo"`},
		{"127.0.0.1:6379", "no scheme"},
	} {
		err := CheckURL(tc.url)
		if tc.want == "" {
			if err != nil {
				t.Errorf("CheckURL(%q): %v", tc.url, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "s3cr3tpw") {
			t.Errorf("CheckURL(%q) = %v, want an error saying %q without the password", tc.url, err, tc.want)
		}
	}
}
