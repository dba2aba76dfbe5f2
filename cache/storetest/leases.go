package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-ai/switchboard/runtime"
)

// Tests of locks and leases, of several gateways on one session, and of
// closing.

func testBusy(t *testing.T, open NewStore) {
	s := open(t, defaults())
	k := sessionKey(t, s, "busy")
	_, lease := acquire(t, s, k)
	_, _, err := s.Acquire(t.Context(), k)
	wantErr(t, "second Acquire", err, runtime.ErrBusy)

	stranger := runtime.Lease{Token: "not-the-token", TTL: lease.TTL}
	_, err = s.Save(t.Context(), k, stranger, runtime.Write{Messages: numbered("x", 1)})
	wantErr(t, "Save with another token", err, runtime.ErrLeaseLost)
	if err := s.Release(t.Context(), k, stranger); err != nil {
		t.Fatalf("Release with another token: %v", err)
	}
	_, _, err = s.Acquire(t.Context(), k)
	wantErr(t, "Acquire after a stranger's Release", err, runtime.ErrBusy)

	release(t, s, k, lease)
	_, lease = acquire(t, s, k)
	release(t, s, k, lease)
	_, err = s.Load(t.Context(), k)
	wantErr(t, "Load after a refused Save", err, runtime.ErrNotFound)
}

// testReleasingSave checks a save that releases the lock in the same call:
// the next run gets in at once, and the releasing run can neither write again
// nor, by releasing late, free the next run's lock.
func testReleasingSave(t *testing.T, open NewStore) {
	a, b := open(t, defaults()), open(t, defaults())
	k := sessionKey(t, a, "released-save")
	_, first := acquire(t, a, k)
	save(t, a, k, first, runtime.Write{Messages: numbered("m", 2), ActiveAgent: "triage", Release: true}, 1)
	if err := a.Release(t.Context(), k, first); err != nil {
		t.Fatalf("Release after a released Save: %v", err)
	}

	sess, next := acquire(t, b, k) // at once: no lease to wait out
	if diff := cmp.Diff(&runtime.Session{Messages: numbered("m", 2), ActiveAgent: "triage", Version: 1}, sess); diff != "" {
		t.Fatalf("Acquire after a released Save mismatch (-want +got):\n%s", diff)
	}
	_, err := a.Save(t.Context(), k, first, runtime.Write{Messages: numbered("late", 1), ActiveAgent: "late"})
	wantErr(t, "Save with the lease a released Save gave back", err, runtime.ErrLeaseLost)
	if err := a.Release(t.Context(), k, first); err != nil {
		t.Fatalf("Release of the lease a released Save gave back: %v", err)
	}
	_, _, err = a.Acquire(t.Context(), k)
	wantErr(t, "Acquire while the next run holds the lock", err, runtime.ErrBusy)

	save(t, b, k, next, runtime.Write{Messages: numbered("m", 3)[2:], ActiveAgent: "billing", Release: true}, 2)
	wantSession(t, a, k, &runtime.Session{Messages: numbered("m", 3), ActiveAgent: "billing", Version: 2})
}

func testLeaseExpiry(t *testing.T, open NewStore) {
	cfg := defaults()
	cfg.LockLease = 250 * time.Millisecond
	a, b := open(t, cfg), open(t, cfg)
	k := sessionKey(t, a, "lease")
	_, stale := acquire(t, a, k)
	save(t, a, k, stale, runtime.Write{Messages: numbered("m", 1), ActiveAgent: "a"}, 1)
	time.Sleep(2 * cfg.LockLease) // gateway a stalls

	sess, lease := acquire(t, b, k)
	if diff := cmp.Diff(&runtime.Session{Messages: numbered("m", 1), ActiveAgent: "a", Version: 1}, sess); diff != "" {
		t.Fatalf("Acquire after the lease expired mismatch (-want +got):\n%s", diff)
	}
	_, err := a.Save(t.Context(), k, stale, runtime.Write{Messages: []runtime.Message{text(runtime.RoleUser, "stale")}, ActiveAgent: "stale"})
	wantErr(t, "Save with an expired lease", err, runtime.ErrLeaseLost)
	wantErr(t, "Renew of an expired lease", a.Renew(t.Context(), k, stale), runtime.ErrLeaseLost)
	if err := a.Release(t.Context(), k, stale); err != nil {
		t.Fatalf("Release of an expired lease: %v", err)
	}
	_, _, err = a.Acquire(t.Context(), k)
	wantErr(t, "Acquire after the stale run released", err, runtime.ErrBusy)

	save(t, b, k, lease, runtime.Write{Messages: numbered("m", 2)[1:], ActiveAgent: "b"}, 2)
	release(t, b, k, lease)
	wantSession(t, a, k, &runtime.Session{Messages: numbered("m", 2), ActiveAgent: "b", Version: 2})
}

func testRenew(t *testing.T, open NewStore) {
	cfg := defaults()
	// Renewing every quarter lease for a lease and a half: only a sleep that
	// overshoots by three quarters of a lease (750 ms) could lose it, which
	// a loaded machine did with a 300 ms lease renewed every 150 ms.
	cfg.LockLease = time.Second
	s := open(t, cfg)
	k := sessionKey(t, s, "renew")
	_, lease := acquire(t, s, k)
	for range 6 {
		time.Sleep(cfg.LockLease / 4)
		if err := s.Renew(t.Context(), k, lease); err != nil {
			t.Fatalf("Renew: %v", err)
		}
	}
	_, _, err := s.Acquire(t.Context(), k)
	wantErr(t, "Acquire of a renewed session", err, runtime.ErrBusy)
	save(t, s, k, lease, runtime.Write{Messages: numbered("m", 1)}, 1)
	release(t, s, k, lease)
}

// testTwoGateways has two stores (two gateways, for a shared backend) take
// turns on one session, so that whatever a store remembers between turns is
// checked against what the other one wrote.
func testTwoGateways(t *testing.T, open NewStore) {
	a, b := open(t, defaults()), open(t, defaults())
	k := sessionKey(t, a, "gateways")
	m := numbered("m", 5)

	write(t, a, k, runtime.Write{Messages: m[:3], ActiveAgent: "triage"})
	wantSession(t, b, k, &runtime.Session{Messages: m[:3], ActiveAgent: "triage", Version: 1})
	write(t, b, k, runtime.Write{Messages: m[3:4], ActiveAgent: "billing"})
	wantSession(t, a, k, &runtime.Session{Messages: m[:4], ActiveAgent: "billing", Version: 2})
	write(t, a, k, runtime.Write{Messages: m[4:], ActiveAgent: "billing"})
	wantSession(t, b, k, &runtime.Session{Messages: m, ActiveAgent: "billing", Version: 3})

	r := numbered("r", 3)
	write(t, b, k, runtime.Write{Messages: r[:2], Replace: true, ActiveAgent: "refunds"})
	wantSession(t, a, k, &runtime.Session{Messages: r[:2], ActiveAgent: "refunds", Version: 4})
	write(t, a, k, runtime.Write{Messages: r[2:], ActiveAgent: "refunds"})
	wantSession(t, b, k, &runtime.Session{Messages: r, ActiveAgent: "refunds", Version: 5})

	// A replace that keeps the length must not pass for the old transcript.
	q := numbered("q", 3)
	write(t, b, k, runtime.Write{Messages: q, Replace: true, ActiveAgent: "refunds"})
	wantSession(t, a, k, &runtime.Session{Messages: q, ActiveAgent: "refunds", Version: 6})

	// Nor may a new session after a delete by the other store, even one of
	// the same length and version.
	if err := b.Delete(t.Context(), k); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	_, err := a.Load(t.Context(), k)
	wantErr(t, "Load after the other store deleted", err, runtime.ErrNotFound)
	n := numbered("n", 3)
	write(t, b, k, runtime.Write{Messages: n, ActiveAgent: "triage"})
	for range 5 {
		write(t, b, k, runtime.Write{ActiveAgent: "refunds"})
	}
	wantSession(t, a, k, &runtime.Session{Messages: n, ActiveAgent: "refunds", Version: 6})
}

// testConcurrency has writers on two stores take turns on several sessions;
// every turn must see every earlier turn, in order.
func testConcurrency(t *testing.T, open NewStore) {
	const sessions, writers, turns = 4, 4, 6
	stores := []runtime.Store{open(t, defaults()), open(t, defaults())}
	p := principal()
	keys := make([]runtime.SessionKey, sessions)
	for i := range keys {
		keys[i] = keyOf(t, stores[0], p, fmt.Sprintf("concurrent-%d", i))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	var wg sync.WaitGroup
	for _, k := range keys {
		for w := range writers {
			wg.Go(func() {
				s := stores[w%len(stores)]
				for turn := 0; turn < turns; {
					sess, lease, err := s.Acquire(ctx, k)
					if errors.Is(err, runtime.ErrBusy) && ctx.Err() == nil {
						time.Sleep(time.Millisecond)
						continue
					}
					if err != nil {
						t.Errorf("writer %d: Acquire(%v): %v", w, k, err)
						return
					}
					if err := checkTurns(sess, -1); err != nil {
						t.Errorf("writer %d turn %d: %v", w, turn, err)
					}
					v, err := s.Save(ctx, k, lease, runtime.Write{Messages: turnMessages(w, turn), ActiveAgent: fmt.Sprint(w)})
					if err != nil || v != sess.Version+1 {
						t.Errorf("writer %d: Save(%v) = %d, %v; want version %d", w, k, v, err, sess.Version+1)
					}
					if err := s.Release(ctx, k, lease); err != nil {
						t.Errorf("writer %d: Release(%v): %v", w, k, err)
						return
					}
					turn++
				}
			})
		}
	}
	wg.Wait()
	for _, k := range keys {
		for _, s := range stores {
			sess, err := s.Load(t.Context(), k)
			if err != nil {
				t.Fatalf("Load(%v): %v", k, err)
			}
			if err := checkTurns(sess, writers*turns); err != nil {
				t.Errorf("%v: %v", k, err)
			}
		}
	}
}

// turnMessages is what writer w saves on its turn: a user and an assistant
// message naming both.
func turnMessages(w, turn int) []runtime.Message {
	return []runtime.Message{
		text(runtime.RoleUser, fmt.Sprintf("w%d t%d", w, turn)),
		text(runtime.RoleAssistant, fmt.Sprintf("w%d t%d", w, turn)),
	}
}

// checkTurns checks that sess holds whole turns, each writer's in order
// from its turn 0, one write per turn, and when want >= 0, want turns.
func checkTurns(sess *runtime.Session, want int) error {
	msgs := sess.Messages
	if len(msgs) != 2*int(sess.Version) || want >= 0 && int(sess.Version) != want {
		return fmt.Errorf("version %d with %d messages, want 2 per version (and %d versions)", sess.Version, len(msgs), want)
	}
	next := map[int]int{}
	for i := 0; i < len(msgs); i += 2 {
		var w, turn int
		if _, err := fmt.Sscanf(msgs[i].Content, "w%d t%d", &w, &turn); err != nil {
			return fmt.Errorf("message %d %q: %v", i, msgs[i].Content, err)
		}
		if got := msgs[i : i+2]; !cmp.Equal(got, turnMessages(w, turn)) {
			return fmt.Errorf("messages %d-%d = %v, want writer %d turn %d", i, i+1, got, w, turn)
		}
		if turn != next[w] {
			return fmt.Errorf("message %d is writer %d turn %d, want turn %d", i, w, turn, next[w])
		}
		next[w]++
	}
	return nil
}

func testPingClose(t *testing.T, open NewStore) {
	s := open(t, defaults())
	if err := s.Ping(t.Context()); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	wantErr(t, "Ping after Close", s.Ping(t.Context()), runtime.ErrStoreUnavailable)
	_, _, err := s.Acquire(t.Context(), runtime.SessionKey{Principal: principal(), ID: "closed"})
	wantErr(t, "Acquire after Close", err, runtime.ErrStoreUnavailable)
}
