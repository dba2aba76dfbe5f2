package storetest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-ai/switchboard/runtime"
)

// Tests of List: a principal's sessions, the most recently written first.

// listed is what List returns of a session, its time aside.
type listed struct {
	ID, Agent string
	Version   int64
}

// list calls List and checks that every time lies in [after, now] and
// that the times never grow down the list; it returns the rest.
func list(t *testing.T, s runtime.Store, principal string, limit int, after time.Time) []listed {
	t.Helper()
	got, err := s.List(t.Context(), principal, limit)
	if err != nil {
		t.Fatalf("List(%q, %d): %v", principal, limit, err)
	}
	if got == nil {
		t.Errorf("List(%q, %d) = nil, want a slice (empty is [])", principal, limit)
	}
	out := []listed{}
	now := time.Now()
	for i, info := range got {
		// Stores keep the time to the millisecond.
		if info.UpdatedAt.Before(after.Truncate(time.Millisecond)) || info.UpdatedAt.After(now) {
			t.Errorf("List: %s updated at %v, want within [%v, %v]", info.ID, info.UpdatedAt, after, now)
		}
		if i > 0 && info.UpdatedAt.After(got[i-1].UpdatedAt) {
			t.Errorf("List: %s (%v) after %s (%v), which is older", info.ID, info.UpdatedAt, got[i-1].ID, got[i-1].UpdatedAt)
		}
		out = append(out, listed{info.ID, info.ActiveAgent, info.Version})
	}
	return out
}

// wantList checks List(principal, limit) against want.
func wantList(t *testing.T, s runtime.Store, principal string, limit int, after time.Time, want []listed) {
	t.Helper()
	if diff := cmp.Diff(want, list(t, s, principal, limit, after)); diff != "" {
		t.Errorf("List(%q, %d) mismatch (-want +got):\n%s", principal, limit, diff)
	}
}

// tick waits until the clock has moved on by a millisecond, so that two
// writes never share a time (stores keep it to the millisecond).
func tick() { time.Sleep(2 * time.Millisecond) }

func testListNewestFirst(t *testing.T, open NewStore) {
	s := open(t, defaults())
	p := principal()
	start := time.Now()
	wantList(t, s, p, 10, start, []listed{})

	a, b, c := keyOf(t, s, p, "a"), keyOf(t, s, p, "b"), keyOf(t, s, p, "c")
	write(t, s, a, runtime.Write{Messages: numbered("a", 1), ActiveAgent: "triage"})
	tick()
	write(t, s, b, runtime.Write{Messages: numbered("b", 1)})
	tick()
	write(t, s, c, runtime.Write{Messages: numbered("c", 1), ActiveAgent: "billing"})
	wantList(t, s, p, 10, start, []listed{{"c", "billing", 1}, {"b", "", 1}, {"a", "triage", 1}})

	// A later write moves a session to the front, with its new state.
	tick()
	write(t, s, a, runtime.Write{Messages: numbered("a2", 1), ActiveAgent: "refunds"})
	wantList(t, s, p, 10, start, []listed{{"a", "refunds", 2}, {"c", "billing", 1}, {"b", "", 1}})

	// An Acquire without a Save writes nothing, and does not move it.
	_, lease := acquire(t, s, b)
	release(t, s, b, lease)
	// Nor does a session locked but never written show up.
	d := keyOf(t, s, p, "d")
	_, lease = acquire(t, s, d)
	wantList(t, s, p, 10, start, []listed{{"a", "refunds", 2}, {"c", "billing", 1}, {"b", "", 1}})
	release(t, s, d, lease)
}

func testListLimit(t *testing.T, open NewStore) {
	s := open(t, defaults())
	p := principal()
	start := time.Now()
	for _, id := range []string{"s1", "s2", "s3", "s4", "s5"} {
		write(t, s, keyOf(t, s, p, id), runtime.Write{Messages: numbered(id, 1)})
		tick()
	}
	wantList(t, s, p, 2, start, []listed{{"s5", "", 1}, {"s4", "", 1}})
	wantList(t, s, p, 5, start, []listed{{"s5", "", 1}, {"s4", "", 1}, {"s3", "", 1}, {"s2", "", 1}, {"s1", "", 1}})
	wantList(t, s, p, 0, start, []listed{})
}

// A principal lists only its own sessions, even when ids are the same, and
// principals that escaping could confuse stay apart.
func testListIsolation(t *testing.T, open NewStore) {
	s := open(t, defaults())
	p1, p2 := principal(), principal()
	start := time.Now()
	write(t, s, keyOf(t, s, p1, "shared"), runtime.Write{Messages: numbered("p1", 1), ActiveAgent: "x"})
	write(t, s, keyOf(t, s, p2, "shared"), runtime.Write{Messages: numbered("p2", 1), ActiveAgent: "y"})
	write(t, s, keyOf(t, s, p2, "own"), runtime.Write{Messages: numbered("p2", 1)})
	wantList(t, s, p1, 10, start, []listed{{"shared", "x", 1}})
	if got := list(t, s, p2, 10, start); len(got) != 2 {
		t.Errorf("List(p2) = %v, want its 2 sessions", got)
	}
	// "a:b" + "c" and "a" + "b:c" name different sessions of different
	// principals (see cache/keys.go): neither lists the other's.
	base := principal()
	write(t, s, keyOf(t, s, base, "x:c"), runtime.Write{Messages: numbered("base", 1), ActiveAgent: "base"})
	write(t, s, keyOf(t, s, base+":x", "c"), runtime.Write{Messages: numbered("odd", 1), ActiveAgent: "odd"})
	wantList(t, s, base, 10, start, []listed{{"x:c", "base", 1}})
	wantList(t, s, base+":x", 10, start, []listed{{"c", "odd", 1}})
}

// Deleted and expired sessions are not listed.
func testListForgets(t *testing.T, open NewStore) {
	cfg := defaults()
	cfg.SessionTTL = time.Second
	s := open(t, cfg)
	p := principal()
	start := time.Now()
	old, gone, kept := keyOf(t, s, p, "old"), keyOf(t, s, p, "gone"), keyOf(t, s, p, "kept")
	write(t, s, old, runtime.Write{Messages: numbered("old", 1)})
	write(t, s, gone, runtime.Write{Messages: numbered("gone", 1)})
	if err := s.Delete(t.Context(), gone); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	wantList(t, s, p, 10, start, []listed{{"old", "", 1}})

	// Past old's TTL, with kept written since: only kept is left.
	time.Sleep(700 * time.Millisecond)
	write(t, s, kept, runtime.Write{Messages: numbered("kept", 1)})
	time.Sleep(700 * time.Millisecond)
	wantList(t, s, p, 10, start, []listed{{"kept", "", 1}})
}
