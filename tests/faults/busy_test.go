package faults_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
)

// Many clients send a turn to the same session at the same moment: exactly
// one run holds the session (one 200, every other request 409 session_busy,
// never two model calls at once), and the transcript is exactly the 200s in
// the order they ran, each run having seen the one before.
func TestConcurrentTurnsOnOneSession(t *testing.T) {
	const rounds, clients = 6, 8
	cases := []struct {
		name  string
		store string
		redis bool
	}{
		{name: "memory", store: "{url: memory://}"},
		{name: "redis", store: fmt.Sprintf("{url: %q}", sharedRedisURL), redis: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.redis {
				needRedis(t)
			}
			// The winner's model call lasts until every other request of its
			// round has been answered (its round's gate opens), so a second
			// run could only get in by breaking the lock, never by arriving
			// late.
			var (
				mu       sync.Mutex
				gate     chan struct{}
				inFlight atomic.Int32
				overlaps atomic.Int32
			)
			fake := fakeupstream.New(t)
			fake.SetFallback(func(r fakeupstream.Request) fakeupstream.Reply {
				if inFlight.Add(1) > 1 {
					overlaps.Add(1)
				}
				defer inFlight.Add(-1)
				mu.Lock()
				ch := gate
				mu.Unlock()
				select {
				case <-ch:
				case <-time.After(10 * time.Second):
				}
				return ackReply(0)(r)
			})
			gw := startDesk(t, fake, tc.store)
			c := newClient(t)
			log := &sessionLog{label: "s00", id: newSessionID(t, "s00")}
			ctx := context.Background()

			var problems []string
			var won []string // the 200s, round by round
			for round := range rounds {
				results := make(chan attempt, clients)
				start := make(chan struct{})
				mu.Lock()
				gate = make(chan struct{})
				open := sync.OnceFunc(func() { close(gate) })
				mu.Unlock()
				var wg sync.WaitGroup
				for i := range clients {
					m := marker(log.label, round*clients+i)
					wg.Go(func() {
						<-start
						results <- c.turn(ctx, gw.URL, log.id, m)
					})
				}
				roundStart := time.Now()
				close(start)
				var got []attempt
				for len(got) < clients {
					select {
					case a := <-results:
						got = append(got, a)
						log.add(a)
					case <-time.After(5 * time.Second):
						open() // a stuck round: let the model calls go and see who won
					}
					if len(got) == clients-1 {
						open()
					}
				}
				wg.Wait()
				if slow := time.Since(roundStart); slow > time.Second {
					t.Logf("round %d took %v: %v", round, slow, got)
				}
				ok, busy := 0, 0
				for _, a := range got {
					switch {
					case a.status == http.StatusOK && a.err == nil:
						ok++
						won = append(won, a.marker)
					case a.status == http.StatusConflict && a.code == "session_busy":
						busy++
					default:
						problems = append(problems, fmt.Sprintf("round %d: %v, want 200 or 409 session_busy", round, a))
					}
				}
				if ok != 1 || busy != clients-1 {
					problems = append(problems, fmt.Sprintf("round %d: %d answered 200 and %d 409, want 1 and %d", round, ok, busy, clients-1))
				}
			}
			if n := overlaps.Load(); n > 0 {
				problems = append(problems, fmt.Sprintf("%d model calls of the session ran while another was running", n))
			}
			turns := mustTurns(t, c, gw.URL, log.id)
			if fmt.Sprint(turns) != fmt.Sprint(won) {
				problems = append(problems, fmt.Sprintf("stored turns %v, want the 200s in order %v", turns, won))
			}
			problems = append(problems, checkSession(log, turns, time.Time{})...)
			problems = append(problems, checkHistories(fake.Requests(), map[string][]string{log.label: turns}, true)...)
			report(t, problems)
		})
	}
}
