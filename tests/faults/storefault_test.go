package faults_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
)

const (
	// faultStoreTimeout is store.timeout of the gateways on a private Redis.
	faultStoreTimeout = 300 * time.Millisecond
	// failFast bounds any answer while Redis is away: a few store
	// operations of faultStoreTimeout each, never a hang.
	failFast = 2 * time.Second
	// recoverWithin bounds how long after Redis is back a session may still
	// be refused. The config keeps the default lock_lease (30s), so a lock
	// the outage left behind must not simply wait it out.
	recoverWithin = 3 * time.Second
)

// redisFault takes a private Redis away and brings it back.
type redisFault struct {
	name string
	// do returns the moment just before Redis went away and the moment just
	// after it answered again.
	do func(r *redisProc) (down, up time.Time)
	// lossy: Redis comes back empty.
	lossy bool
}

var (
	pauseRedis = redisFault{
		name: "paused",
		do: func(r *redisProc) (down, up time.Time) {
			down = time.Now()
			r.signal(syscall.SIGSTOP)
			time.Sleep(1500 * time.Millisecond)
			r.signal(syscall.SIGCONT)
			return down, time.Now()
		},
	}
	restartRedis = redisFault{
		name: "killed and restarted",
		do: func(r *redisProc) (down, up time.Time) {
			down = time.Now()
			r.kill()
			time.Sleep(time.Second)
			r.start()
			return down, time.Now()
		},
		lossy: true,
	}
)

// While sessions run, their Redis stalls (SIGSTOP, then SIGCONT) or dies
// (SIGKILL, then a restart, empty, on the same port). While it is away,
// every request fails fast with 503 store_unavailable and /readyz is 503;
// once it is back the same gateway serves every session again by itself,
// within seconds and not only once store.lock_lease has let go of locks
// the outage left behind; and no transcript ever holds half a turn, a turn
// twice, a turn out of order or a turn whose client got 409, nor lacks a
// turn whose client got 200 (unless a restarted Redis lost it with
// everything else).
func TestRedisFaultMidLoad(t *testing.T) {
	for _, f := range []redisFault{pauseRedis, restartRedis} {
		t.Run(f.name, func(t *testing.T) {
			runFaults(t, faultPlan{sessions: 8, gateways: 1, faults: []redisFault{f}})
		})
	}
}

// faultPlan is a run of sessions on gateways sharing a private Redis,
// through a series of faults.
type faultPlan struct {
	sessions, gateways int
	faults             []redisFault
	// calm is how long the load runs before the first fault and between
	// two faults, after every session has recovered; default none.
	calm time.Duration
}

// runFaults runs plan and checks, for every fault, that requests and
// /readyz failed fast with 503 while Redis was away and that every session
// recovered, then checks every transcript against what its client saw.
func runFaults(t *testing.T, plan faultPlan) {
	r := startRedis(t)
	fake := fakeupstream.New(t)
	fake.SetFallback(ackReply(10 * time.Millisecond))
	var urls []string
	for range plan.gateways {
		urls = append(urls, startDesk(t, fake, fmt.Sprintf("{url: %q, timeout: %v}", r.URL(), faultStoreTimeout)).URL)
	}
	c := newClient(t)
	ctx := context.Background()

	l := newLoad(t, c, urls, plan.sessions)
	l.pause = 40 * time.Millisecond
	stop := make(chan struct{})
	waitLoad := l.run(ctx, 0, stop)
	var waitProbes []func() []probe
	for _, u := range urls {
		waitProbes = append(waitProbes, prober(ctx, c, u, 50*time.Millisecond, stop))
	}
	stopped := false
	halt := func() [][]probe {
		if !stopped {
			stopped = true
			close(stop)
		}
		waitLoad()
		var probes [][]probe
		for _, w := range waitProbes {
			probes = append(probes, w())
		}
		return probes
	}
	defer halt()

	if !l.allOKSince(time.Time{}, time.Now().Add(10*time.Second)) {
		halt()
		t.Fatalf("the sessions did not get going before the first fault:\n%s", attemptsSummary(l))
	}
	type outage struct {
		fault    redisFault
		down, up time.Time
	}
	var outages []outage
	var lostUntil time.Time
	for i, f := range plan.faults {
		time.Sleep(plan.calm)
		down, up := f.do(r)
		outages = append(outages, outage{f, down, up})
		if f.lossy {
			lostUntil = up
		}
		if !l.allOKSince(up, up.Add(recoverWithin)) {
			t.Errorf("fault %d (%s): %v after Redis came back, some sessions still get no 200: %s",
				i, f.name, recoverWithin, refusedSince(l, up))
			break
		}
	}
	probes := halt()
	t.Logf("%d faults; %s", len(outages), attemptsSummary(l))

	var problems []string
	for i, o := range outages {
		away := 0
		for _, s := range l.logs {
			for _, a := range s.all() {
				if a.start.After(o.down) && a.end.Before(o.up) {
					away++
					if a.status != http.StatusServiceUnavailable || a.code != "store_unavailable" {
						problems = append(problems, fmt.Sprintf("session %s: %v while Redis was away, want 503 store_unavailable", s.label, a))
					}
				}
			}
		}
		if away == 0 {
			problems = append(problems, fmt.Sprintf("fault %d (%s): no request started and ended while Redis was away", i, o.fault.name))
		}
		next := time.Now()
		if i+1 < len(outages) {
			next = outages[i+1].down
		}
		for g, ps := range probes {
			for _, p := range checkProbes(within(ps, o.down.Add(-time.Second), next), o.down, o.up, failFast) {
				problems = append(problems, fmt.Sprintf("fault %d (%s), gateway %d: %s", i, o.fault.name, g, p))
			}
		}
	}
	for _, s := range l.logs {
		for _, a := range s.all() {
			if a.took() > failFast {
				problems = append(problems, fmt.Sprintf("session %s: %v: slower than %v", s.label, a, failFast))
			}
		}
	}

	// Every transcript is exactly the turns the client saw succeed, the
	// same on every gateway.
	stored := make(map[string][]string)
	landed := 0
	for _, s := range l.logs {
		turns := mustTurns(t, c, urls[0], s.id)
		for _, u := range urls[1:] {
			if other := mustTurns(t, c, u, s.id); fmt.Sprint(other) != fmt.Sprint(turns) {
				problems = append(problems, fmt.Sprintf("session %s: gateways disagree: %v and %v", s.label, turns, other))
			}
		}
		stored[s.label] = turns
		problems = append(problems, checkSession(s, turns, lostUntil)...)
		for _, a := range s.all() {
			if a.status == http.StatusServiceUnavailable && slices.Contains(turns, a.marker) {
				landed++
			}
		}
	}
	if landed > 0 {
		// Allowed: Redis ran a write whose answer the gateway gave up on.
		t.Logf("%d turns answered 503 store_unavailable were stored whole all the same", landed)
	}
	problems = append(problems, checkHistories(fake.Requests(), stored, lostUntil.IsZero())...)
	report(t, problems)
}

// within returns the probes made between from and to.
func within(probes []probe, from, to time.Time) []probe {
	var out []probe
	for _, p := range probes {
		if !p.start.Before(from) && p.end.Before(to) {
			out = append(out, p)
		}
	}
	return out
}

// checkProbes checks /readyz around an outage from down to up: every probe
// answered within bound, those made during the outage said 503, and after
// it the gateway was ready again.
func checkProbes(probes []probe, down, up time.Time, bound time.Duration) []string {
	var problems []string
	during, readyAfter := 0, false
	for _, p := range probes {
		took := p.end.Sub(p.start)
		if p.err != nil {
			problems = append(problems, fmt.Sprintf("GET /readyz failed: %v", p.err))
			continue
		}
		if took > bound {
			problems = append(problems, fmt.Sprintf("GET /readyz took %v, over %v", took, bound))
		}
		if p.start.After(down) && p.end.Before(up) {
			during++
			if p.status != http.StatusServiceUnavailable {
				problems = append(problems, fmt.Sprintf("GET /readyz during the outage (at +%v): %d, want 503", p.start.Sub(down).Round(time.Millisecond), p.status))
			}
		}
		if p.start.After(up) && p.status == http.StatusOK {
			readyAfter = true
		}
	}
	if during == 0 {
		problems = append(problems, "no /readyz probe ran during the outage")
	}
	if !readyAfter {
		problems = append(problems, "GET /readyz never answered 200 after the outage")
	} else if last := probes[len(probes)-1]; last.status != http.StatusOK {
		problems = append(problems, fmt.Sprintf("the last GET /readyz before the next fault answered %d, want 200", last.status))
	}
	return problems
}

// attemptsSummary counts every session's answers by status and code.
func attemptsSummary(l *load) string {
	counts := map[string]int{}
	total := 0
	for _, s := range l.logs {
		for _, a := range s.all() {
			key := fmt.Sprintf("%d %s", a.status, a.code)
			if a.err != nil {
				key = "failed: " + a.err.Error()
			}
			counts[key]++
			total++
		}
	}
	return fmt.Sprintf("%d requests: %v", total, counts)
}

// refusedSince lists the sessions that got no 200 since t, with their
// answers since then.
func refusedSince(l *load, t time.Time) string {
	var b strings.Builder
	for _, s := range l.logs {
		if s.okSince(t) {
			continue
		}
		counts := map[string]int{}
		for _, a := range s.all() {
			if a.start.After(t) {
				counts[fmt.Sprintf("%d %s", a.status, a.code)]++
			}
		}
		fmt.Fprintf(&b, "\n  session %s: %v", s.label, counts)
	}
	return b.String()
}
