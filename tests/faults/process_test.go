package faults_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
)

// A gateway killed (SIGKILL) in the middle of a run leaves its session
// locked only until store.lock_lease runs out: a new gateway on the same
// Redis answers 409 session_busy while the dead run's lease lives, then
// serves the session, whose transcript holds nothing of the killed turn.
func TestGatewayKilledMidRun(t *testing.T) {
	needRedis(t)
	const lockLease = time.Second
	log := &sessionLog{label: "s00", id: newSessionID(t, "s00")}
	hang := marker(log.label, 2)
	fake := fakeupstream.New(t)
	fake.SetFallback(func(r fakeupstream.Request) fakeupstream.Reply {
		if users := userTexts(r); len(users) > 0 && users[len(users)-1] == hang {
			return fakeupstream.Reply{Hang: true}
		}
		return ackReply(0)(r)
	})
	yaml := deskYAML(fake.URL, fmt.Sprintf("{url: %q, lock_lease: %v}", sharedRedisURL, lockLease))
	c := newClient(t)
	ctx := context.Background()

	old := startGatewayProc(t, yaml)
	for k := range 2 {
		a := c.turn(ctx, old.URL, log.id, marker(log.label, k))
		log.add(a)
		if a.status != http.StatusOK || a.err != nil {
			t.Fatalf("turn before the kill: %v", a)
		}
	}
	killed := make(chan attempt, 1)
	go func() { killed <- c.turn(ctx, old.URL, log.id, hang) }()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := fake.WaitRequests(wctx, 3); err != nil {
		t.Fatalf("the run to kill never called its model: %v", err)
	}
	// The live run outlasts its lease by renewing it.
	time.Sleep(lockLease + lockLease/2)
	if a := c.turn(ctx, old.URL, log.id, marker(log.label, 3)); a.status != http.StatusConflict || a.code != "session_busy" {
		t.Errorf("a turn while the run lives past its lease: %v, want 409 session_busy", a)
	} else {
		log.add(a)
	}

	old.signal(syscall.SIGKILL)
	killedAt := time.Now()
	if a := <-killed; a.status == http.StatusOK {
		t.Errorf("the killed run answered %v", a)
	}

	fresh := startGatewayProc(t, yaml)
	var first, served *attempt
	for k := 4; served == nil && time.Since(killedAt) < lockLease+10*time.Second; k++ {
		a := c.turn(ctx, fresh.URL, log.id, marker(log.label, k))
		log.add(a)
		if first == nil {
			first = &a
		}
		switch {
		case a.status == http.StatusOK && a.err == nil:
			served = &a
		case a.status == http.StatusConflict && a.code == "session_busy":
			if late := a.start.Sub(killedAt); late > lockLease+200*time.Millisecond {
				t.Errorf("%v, %v after the kill: the dead run's lease (%v) should be gone", a, late.Round(time.Millisecond), lockLease)
			}
			time.Sleep(50 * time.Millisecond)
		default:
			t.Fatalf("turn after the kill: %v, want 409 session_busy or 200", a)
		}
	}
	if served == nil {
		t.Fatalf("the session is still refused %v after the kill", time.Since(killedAt).Round(time.Millisecond))
	}
	// The dead run's lease had at least two thirds of lock_lease left when
	// it died (it renews every third); a request well within that must see it.
	if early := first.start.Sub(killedAt); early < lockLease/2 {
		if first.status != http.StatusConflict {
			t.Errorf("first turn %v after the kill: %v, want 409 session_busy while the dead run's lease lives", early.Round(time.Millisecond), *first)
		}
	} else {
		t.Logf("the new gateway was up only %v after the kill; the dead lease may have gone already", early.Round(time.Millisecond))
	}
	t.Logf("served again %v after the kill", served.end.Sub(killedAt).Round(time.Millisecond))

	turns := mustTurns(t, c, fresh.URL, log.id)
	want := []string{marker(log.label, 0), marker(log.label, 1), served.marker}
	if fmt.Sprint(turns) != fmt.Sprint(want) {
		t.Errorf("stored turns %v, want %v (nothing of the killed turn %s)", turns, want, hang)
	}
	report(t, checkSession(log, turns, time.Time{}))
}

// SIGTERM drains the gateway: /readyz turns 503 at once, the stream in
// flight finishes whole with [DONE], the process exits 0 within
// server.drain_timeout, and the session is left unlocked for the next
// gateway.
func TestGracefulShutdownOnSIGTERM(t *testing.T) {
	needRedis(t)
	const drainTimeout = 5 * time.Second // deskYAML's server.drain_timeout
	log := &sessionLog{label: "s00", id: newSessionID(t, "s00")}
	fake := fakeupstream.New(t)
	fake.SetFallback(func(r fakeupstream.Request) fakeupstream.Reply {
		reply := ackReply(0)(r)
		if r.Parsed.Stream {
			// About a second: four delays between five pieces.
			reply.StreamChunks = pieces(reply.Text, 5)
			reply.ChunkDelay = 250 * time.Millisecond
		}
		return reply
	})
	// The default lock_lease (30s): a lock left behind would show.
	store := fmt.Sprintf("{url: %q}", sharedRedisURL)
	gw := startGatewayProc(t, deskYAML(fake.URL, store))
	c := newClient(t)
	ctx := context.Background()

	m := marker(log.label, 0)
	events, err := c.stream(ctx, gw.URL, log.id, m)
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	first, ok := <-events
	if !ok || first.err != nil {
		t.Fatalf("the stream ended before its first event: %+v", first)
	}
	gw.signal(syscall.SIGTERM)
	signalled := time.Now()

	// Probe /readyz until the stream ends.
	var probes []probe
	got := []sseEvent{first}
	for ended := false; !ended; {
		select {
		case ev, ok := <-events:
			if !ok {
				ended = true
				break
			}
			got = append(got, ev)
		default:
			probes = append(probes, c.readyz(ctx, gw.URL))
			time.Sleep(10 * time.Millisecond)
		}
	}
	ended := time.Now()

	saw503 := false
	for _, p := range probes {
		switch {
		case p.status == http.StatusServiceUnavailable:
			saw503 = true
		case p.status == http.StatusOK && saw503:
			t.Errorf("GET /readyz answered 200 again %v after SIGTERM", p.start.Sub(signalled).Round(time.Millisecond))
		}
	}
	if !saw503 {
		var first probe
		if len(probes) > 0 {
			first = probes[0]
		}
		t.Errorf("GET /readyz never answered 503 in the %v between SIGTERM and the end of the stream (%d probes; first: %d %v)",
			ended.Sub(signalled).Round(time.Millisecond), len(probes), first.status, first.err)
	}

	// The stream went on after the signal and finished whole.
	var text strings.Builder
	done, afterSignal := false, 0
	for _, ev := range got {
		if ev.at.After(signalled) {
			afterSignal++
		}
		switch {
		case ev.err != nil:
			t.Errorf("the stream broke after SIGTERM: %v", ev.err)
		case ev.data == "[DONE]":
			done = true
		case done:
			t.Errorf("event after [DONE]: %s", ev.data)
		default:
			var ch struct {
				Choices []struct {
					Delta struct {
						Content string `json:"content"`
					} `json:"delta"`
				} `json:"choices"`
				Error json.RawMessage `json:"error"`
			}
			if err := json.Unmarshal([]byte(ev.data), &ch); err != nil || ch.Error != nil {
				t.Errorf("stream event: %s", ev.data)
				continue
			}
			for _, choice := range ch.Choices {
				text.WriteString(choice.Delta.Content)
			}
		}
	}
	if !done {
		t.Errorf("the stream ended without [DONE]")
	}
	if afterSignal < 2 {
		t.Errorf("only %d stream events came after SIGTERM; the stream was not in flight", afterSignal)
	}
	if text.String() != ack(m) {
		t.Errorf("streamed %q, want %q", text.String(), ack(m))
	}

	wctx, cancel := context.WithDeadline(ctx, signalled.Add(drainTimeout+2*time.Second))
	defer cancel()
	if code, ok := gw.wait(wctx); !ok {
		t.Errorf("the gateway still runs %v after SIGTERM", time.Since(signalled).Round(time.Millisecond))
	} else if code != 0 {
		t.Errorf("the gateway exited with %d, want 0", code)
	}

	// A new gateway serves the session at once: the drained run let it go.
	next := startDesk(t, fake, store)
	log.add(attempt{marker: m, status: http.StatusOK})
	a := c.turn(ctx, next.URL, log.id, marker(log.label, 1))
	log.add(a)
	if a.status != http.StatusOK || a.err != nil {
		t.Errorf("the first turn on a new gateway: %v, want 200", a)
	}
	turns := mustTurns(t, c, next.URL, log.id)
	report(t, checkSession(log, turns, time.Time{}))
	if want := []string{m, marker(log.label, 1)}; fmt.Sprint(turns) != fmt.Sprint(want) {
		t.Errorf("stored turns %v, want %v", turns, want)
	}
}

// pieces cuts s into n pieces of about the same length.
func pieces(s string, n int) []string {
	var out []string
	size := (len(s) + n - 1) / n
	for len(s) > size {
		out = append(out, s[:size])
		s = s[size:]
	}
	return append(out, s)
}

// sseEvent is one data payload of a stream, or the error that ended it.
type sseEvent struct {
	data string
	err  error
	at   time.Time // when it arrived
}

// stream starts a streamed turn and returns its events as they arrive;
// the channel closes when the stream ends.
func (c *client) stream(ctx context.Context, baseURL, id, marker string) (<-chan sseEvent, error) {
	body := fmt.Sprintf(`{"model":"desk","stream":true,"messages":[{"role":"user","content":%q}]}`, marker)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Session-Id", id)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("stream answered %d", resp.StatusCode)
	}
	events := make(chan sseEvent, 64)
	go func() {
		defer close(events)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				events <- sseEvent{data: d, at: time.Now()}
			}
		}
		if err := sc.Err(); err != nil {
			events <- sseEvent{err: err, at: time.Now()}
		}
	}()
	return events, nil
}
