package faults_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// load drives sessions in parallel, one client goroutine per session, each
// sending its turns one after another and spreading them over gateways in
// turn (attempt k goes to gateway k mod len).
type load struct {
	c        *client
	gateways []string
	logs     []*sessionLog
	// pause is waited between two turns of a session.
	pause time.Duration
}

func newLoad(t *testing.T, c *client, gateways []string, sessions int) *load {
	l := &load{c: c, gateways: gateways}
	for i := range sessions {
		label := fmt.Sprintf("s%02d", i)
		l.logs = append(l.logs, &sessionLog{label: label, id: newSessionID(t, label)})
	}
	return l
}

// run makes up to turns attempts per session (no bound when turns is 0)
// and stops early when stop is closed; the returned wait waits for every
// session's client to finish.
func (l *load) run(ctx context.Context, turns int, stop <-chan struct{}) (wait func()) {
	var wg sync.WaitGroup
	for _, s := range l.logs {
		wg.Go(func() {
			for k := 0; turns == 0 || k < turns; k++ {
				select {
				case <-stop:
					return
				case <-ctx.Done():
					return
				default:
				}
				s.add(l.c.turn(ctx, l.gateways[k%len(l.gateways)], s.id, marker(s.label, k)))
				if l.pause > 0 {
					select {
					case <-time.After(l.pause):
					case <-stop:
						return
					}
				}
			}
		})
	}
	return wg.Wait
}

// allOKSince waits until every session got a 200 for an attempt started
// after since, and reports whether that happened before the deadline.
func (l *load) allOKSince(since, deadline time.Time) bool {
	for {
		done := true
		for _, s := range l.logs {
			if !s.okSince(since) {
				done = false
				break
			}
		}
		if done {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// prober polls GET /readyz every interval until stop is closed, and once
// more then, so that its last probe follows whatever the caller waited for
// before it stopped (sessions that recover within a probe's interval of an
// outage's end otherwise left no probe after it); the returned wait waits
// for it and returns every probe.
func prober(ctx context.Context, c *client, baseURL string, every time.Duration, stop <-chan struct{}) (wait func() []probe) {
	var probes []probe
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			probes = append(probes, c.readyz(ctx, baseURL))
			select {
			case <-stop:
				probes = append(probes, c.readyz(ctx, baseURL))
				return
			case <-time.After(every):
			}
		}
	}()
	return func() []probe { <-done; return probes }
}
