// Package testenv holds what the project's test suites share about their
// environment: the real Redis they use, the goroutines a finished test
// may leave for a moment, and how a test gets a port (ports.go).
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
// after a test, idle freshstack workers (IgnoreIdleWorkers), and any extra
// options.
func VerifyNoLeaks(m *testing.M, extra ...goleak.Option) {
	opts := append([]goleak.Option{
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		IgnoreIdleWorkers(),
	}, extra...)
	goleak.VerifyTestMain(m, opts...)
}

// IgnoreIdleWorkers ignores freshstack's idle workers, which end 100 ms
// after their last call: a test's last one may still be there when the
// leak check starts, and goleak's retries wait about 0.4 s in all, a
// margin a loaded machine could eat. Only a worker waiting for a call is
// ignored; one still running a call is reported. freshstack's own tests
// check that idle workers end.
func IgnoreIdleWorkers() goleak.Option {
	return goleak.IgnoreTopFunction("github.com/switchboard-ai/switchboard/internal/freshstack.(*worker).nextCall")
}
