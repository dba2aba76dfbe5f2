package faults_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
	"github.com/switchboard-ai/switchboard/internal/testenv"
)

// A hundred sessions' first turns at once, through the HTTP API, on a
// Redis whose every round trip takes 50 ms (a relay) with two connections
// in the store's pool: all of them answer 200 and are stored. Each turn
// makes two round trips (acquire; save and release), more on this fresh
// Redis, which does not know the store's scripts yet (as after a restart);
// sent one at a time they would need 5 s or more on two connections, and
// the turns failed with 503 store_unavailable past the 2 s store timeout
// (all 100 before the batcher; 29 with it, while the index script's text
// still went one save at a time). The commands that wait share pipelines
// instead (cache/batch.go; issue 22, where 9,700 streams opening within
// 2 s on two cores made round trips that slow).
func TestFarRedisServesManySessionsAtOnce(t *testing.T) {
	r := startRedis(t)
	far := testenv.SlowRelay(t, fmt.Sprintf("127.0.0.1:%d", r.port), 50*time.Millisecond)
	fake := fakeupstream.New(t)
	fake.SetFallback(ackReply(0))
	gw := startDesk(t, fake, fmt.Sprintf("{url: %q, timeout: 2s}", "redis://"+far+"/0?pool_size=2"))
	c := newClient(t)

	const sessions = 100
	ids := make([]string, sessions)
	attempts := make([]attempt, sessions)
	var wg sync.WaitGroup
	for i := range sessions {
		ids[i] = newSessionID(t, fmt.Sprint("far", i))
		wg.Go(func() { attempts[i] = c.turn(context.Background(), gw.URL, ids[i], marker(ids[i], 1)) })
	}
	wg.Wait()
	failed, slowest := 0, time.Duration(0)
	for i, a := range attempts {
		slowest = max(slowest, a.took())
		if a.status != http.StatusOK || a.err != nil {
			if failed++; failed <= 3 {
				t.Errorf("session %d: %v", i, a)
			}
		}
	}
	if failed > 0 {
		t.Fatalf("%d of %d first turns failed", failed, sessions)
	}
	t.Logf("%d first turns, the slowest in %v", sessions, slowest.Round(time.Millisecond))
	for _, i := range []int{0, sessions / 2, sessions - 1} {
		if got := mustTurns(t, c, gw.URL, ids[i]); len(got) != 1 || got[0] != marker(ids[i], 1) {
			t.Errorf("session %d stores %v, want its one turn", i, got)
		}
	}
}
