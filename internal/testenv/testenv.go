// Package testenv holds what the project's test suites share about their
// environment: the real Redis they use, and the goroutines a finished test
// may leave for a moment.
package testenv

import (
	"net"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// RedisURL is the project's Redis, on every machine of the project and in
// CI. Tests share it with unique session ids and never signal it.
const RedisURL = "redis://127.0.0.1:6379/0"

// NeedRedis skips a test when Redis is unreachable, except with CI=true,
// where it fails loudly: CI must never pass by skipping.
func NeedRedis(t testing.TB) {
	t.Helper()
	c, err := net.DialTimeout("tcp", "127.0.0.1:6379", time.Second)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("Redis is not reachable on 127.0.0.1:6379 (CI=true): %v", err)
		}
		t.Skipf("Redis is not reachable: %v", err)
	}
	_ = c.Close()
}

// VerifyNoLeaks runs a package's tests and fails them if goroutines are
// left behind, ignoring pooled keep-alive connections (of
// http.DefaultClient and the gateway's transports), which linger briefly
// after a test, and any extra options.
func VerifyNoLeaks(m *testing.M, extra ...goleak.Option) {
	opts := append([]goleak.Option{
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
	}, extra...)
	goleak.VerifyTestMain(m, opts...)
}
