// Package faults_test checks how the gateway behaves under store faults,
// load and process death: a Redis that stalls or dies mid-load, many
// sessions and many gateways at once, concurrent turns on one session, a
// gateway killed mid-run and one stopped with SIGTERM. Every test drives the
// real HTTP API, in process (internal/gwtest) or as the built binary, in
// front of the scripted fake upstream, and checks every session's
// transcript against what its client saw.
package faults_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/switchboard-ai/switchboard/internal/testenv"
)

// gatewayBinary is the switchboard binary TestMain builds once for the
// tests that run the gateway as a process; err is set when the build failed.
var gatewayBinary struct {
	path string
	err  error
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "switchboard-faults-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults: temp dir:", err)
		os.Exit(1)
	}
	gatewayBinary.path, gatewayBinary.err = buildGateway(dir)
	testenv.VerifyNoLeaks(m,
		// go-redis probes a dead Redis from this goroutine once a pool's
		// dials keep failing; it sees Close only after its one-second sleep.
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"),
		goleak.Cleanup(func(int) { _ = os.RemoveAll(dir) }),
	)
}

// buildGateway builds ./cmd/switchboard into dir, with the race detector
// when this test binary has it: the packages are then already compiled for
// the test, so the build is mostly a link, and the process tests catch
// races too.
func buildGateway(dir string) (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	bin := filepath.Join(dir, "switchboard")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "./cmd/switchboard")...)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/switchboard: %w\n%s", err, b)
	}
	return bin, nil
}

// needBinary returns the gateway binary or fails the test.
func needBinary(t *testing.T) string {
	t.Helper()
	if gatewayBinary.err != nil {
		t.Fatalf("gateway binary: %v", gatewayBinary.err)
	}
	return gatewayBinary.path
}

// sharedRedisURL is the project's Redis; tests use it with unique session
// ids and never signal it.
const sharedRedisURL = testenv.RedisURL

// needRedis skips a test when the shared Redis is unreachable, except in CI
// where it fails loudly.
func needRedis(t *testing.T) { testenv.NeedRedis(t) }
