package cache

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/switchboard-ai/switchboard/internal/testenv"
)

// TestMain fails the package when a store leaves a goroutine behind after
// Close (the memory sweeper, a Redis connection).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, testenv.IgnoreIdleWorkers(),
		// go-redis probes a dead Redis from this goroutine once a pool's dials
		// keep failing; it sees Close only after its one-second sleep.
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}
