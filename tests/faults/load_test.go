package faults_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
)

// Many sessions run many turns at once, on each store and on two gateways
// that share one Redis with every session's turns alternating between them:
// every turn succeeds, every transcript holds every turn once and in order,
// and every model call saw exactly the turns before it (no gateway worked
// on a stale transcript).
func TestManySessionsAtOnce(t *testing.T) {
	const sessions, turns = 32, 10
	cases := []struct {
		name     string
		store    string
		redis    bool
		gateways int
	}{
		{name: "memory", store: "{url: memory://}", gateways: 1},
		{name: "redis", store: fmt.Sprintf("{url: %q}", sharedRedisURL), redis: true, gateways: 1},
		{name: "redis two gateways", store: fmt.Sprintf("{url: %q}", sharedRedisURL), redis: true, gateways: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.redis {
				needRedis(t)
			}
			fake := fakeupstream.New(t)
			fake.SetFallback(ackReply(5 * time.Millisecond))
			var urls []string
			for range tc.gateways {
				urls = append(urls, startDesk(t, fake, tc.store).URL)
			}
			c := newClient(t)
			l := newLoad(t, c, urls, sessions)
			ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
			defer cancel()
			l.run(ctx, turns, nil)()

			var problems []string
			stored := make(map[string][]string)
			for _, s := range l.logs {
				for _, a := range s.all() {
					if a.status != 200 || a.err != nil {
						problems = append(problems, fmt.Sprintf("session %s: %v, want 200", s.label, a))
					}
				}
				// Each gateway shows the same, complete transcript.
				var want []string
				for k := range turns {
					want = append(want, marker(s.label, k))
				}
				for _, u := range urls {
					got := mustTurns(t, c, u, s.id)
					if fmt.Sprint(got) != fmt.Sprint(want) {
						problems = append(problems, fmt.Sprintf("session %s on %s: turns %v, want %v", s.label, u, got, want))
					}
					stored[s.label] = got
				}
				problems = append(problems, checkSession(s, stored[s.label], time.Time{})...)
			}
			problems = append(problems, checkHistories(fake.Requests(), stored, true)...)
			if n := len(fake.Requests()); n != sessions*turns {
				problems = append(problems, fmt.Sprintf("the upstream got %d model calls, want %d", n, sessions*turns))
			}
			report(t, problems)
		})
	}
}
