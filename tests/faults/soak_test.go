package faults_test

import (
	"os"
	"testing"
	"time"
)

// TestSoakRedisFaults is the long version of TestRedisFaultMidLoad: 32
// sessions on two gateways sharing a private Redis, which stalls and dies
// in turn, with calm spells between, for SWITCHBOARD_SOAK_DURATION (a Go
// duration, default 2m). It runs only with SWITCHBOARD_SOAK=1:
//
//	SWITCHBOARD_SOAK=1 go test -race -run Soak -timeout 30m -v ./tests/faults/
func TestSoakRedisFaults(t *testing.T) {
	if os.Getenv("SWITCHBOARD_SOAK") != "1" {
		t.Skip("a soak: set SWITCHBOARD_SOAK=1 to run it")
	}
	duration := 2 * time.Minute
	if v := os.Getenv("SWITCHBOARD_SOAK_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("SWITCHBOARD_SOAK_DURATION: %v", err)
		}
		duration = d
	}
	const calm = 2 * time.Second
	// A cycle is a calm spell, the fault (about 1.5s) and the recovery.
	var faults []redisFault
	for i := range max(1, int(duration/(calm+3*time.Second))) {
		faults = append(faults, []redisFault{pauseRedis, restartRedis}[i%2])
	}
	runFaults(t, faultPlan{sessions: 32, gateways: 2, faults: faults, calm: calm})
}
