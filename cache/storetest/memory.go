package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-ai/switchboard/runtime"
)

// The memory slots' part of the suite: a store that implements
// runtime.MemoryStore must pass it too (every store of package cache does).

// memoryStore returns the store as a runtime.MemoryStore, or fails the test.
func memoryStore(t *testing.T, s runtime.Store) runtime.MemoryStore {
	t.Helper()
	m, ok := s.(runtime.MemoryStore)
	if !ok {
		t.Fatalf("%T does not implement runtime.MemoryStore", s)
	}
	return m
}

// memoryKey returns a key under a principal of its own and forgets its
// facts when the test ends.
func memoryKey(t *testing.T, m runtime.MemoryStore, slot string, scope ...runtime.ScopeValue) runtime.MemoryKey {
	t.Helper()
	k := runtime.MemoryKey{Principal: principal(), Slot: slot, Scope: scope}
	t.Cleanup(func() {
		if err := m.Forget(context.Background(), k); err != nil {
			t.Errorf("clean up %v: %v", k, err)
		}
	})
	return k
}

// remember stores fact or fails the test, and checks how many facts went.
func remember(t *testing.T, m runtime.MemoryStore, k runtime.MemoryKey, fact string, maxBytes int, wantDropped int) {
	t.Helper()
	n, err := m.Remember(t.Context(), k, fact, maxBytes, time.Minute)
	if err != nil {
		t.Fatalf("Remember(%q): %v", fact, err)
	}
	if n != wantDropped {
		t.Errorf("Remember(%q) dropped %d facts, want %d", fact, n, wantDropped)
	}
}

// wantFacts checks k's facts.
func wantFacts(t *testing.T, m runtime.MemoryStore, k runtime.MemoryKey, want []string) {
	t.Helper()
	got, err := m.Recall(t.Context(), k)
	if err != nil {
		t.Fatalf("Recall: %v", err)
	}
	if diff := cmp.Diff(want, got, cmpEmpty); diff != "" {
		t.Errorf("facts (-want +got):\n%s", diff)
	}
}

// cmpEmpty lets nil and an empty list of facts compare equal.
var cmpEmpty = cmp.Comparer(func(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
})

func testMemoryFacts(t *testing.T, open NewStore) {
	a, b := open(t, defaults()), open(t, defaults())
	ma, mb := memoryStore(t, a), memoryStore(t, b)
	k := memoryKey(t, ma, "profile", runtime.ScopeValue{Name: "metadata.customer_id", Value: "c1"})
	wantFacts(t, ma, k, nil)
	remember(t, ma, k, "prefers email", 100, 0)
	remember(t, mb, k, "plan: pro\twith \"quotes\" and é", 100, 0)
	// Two gateways on one backend see the same facts.
	wantFacts(t, mb, k, []string{"prefers email", "plan: pro\twith \"quotes\" and é"})
	wantFacts(t, ma, k, []string{"prefers email", "plan: pro\twith \"quotes\" and é"})
	if err := mb.Forget(t.Context(), k); err != nil {
		t.Fatalf("Forget: %v", err)
	}
	wantFacts(t, ma, k, nil)
	if err := ma.Forget(t.Context(), k); err != nil {
		t.Fatalf("Forget of nothing: %v", err)
	}
}

func testMemoryTrim(t *testing.T, open NewStore) {
	m := memoryStore(t, open(t, defaults()))
	k := memoryKey(t, m, "notes", runtime.ScopeValue{Name: "session", Value: "s1"})
	remember(t, m, k, "aaaa", 10, 0)
	remember(t, m, k, "bbbb", 10, 0)
	remember(t, m, k, "cc", 10, 0) // exactly 10 bytes: nothing goes
	wantFacts(t, m, k, []string{"aaaa", "bbbb", "cc"})
	remember(t, m, k, "ddddd", 10, 2) // 15 bytes: aaaa and bbbb go
	wantFacts(t, m, k, []string{"cc", "ddddd"})
	remember(t, m, k, "eeeeeeeeee", 10, 2) // a fact of max_bytes fills the slot alone
	wantFacts(t, m, k, []string{"eeeeeeeeee"})

	_, err := m.Remember(t.Context(), k, "fffffffffff", 10, time.Minute)
	if !errors.Is(err, runtime.ErrFactTooLarge) {
		t.Fatalf("Remember of 11 bytes over max 10: err = %v, want ErrFactTooLarge", err)
	}
	wantFacts(t, m, k, []string{"eeeeeeeeee"})
}

func testMemoryIsolation(t *testing.T, open NewStore) {
	m := memoryStore(t, open(t, defaults()))
	c1 := runtime.ScopeValue{Name: "metadata.customer_id", Value: "c1"}
	k := memoryKey(t, m, "profile", c1)
	others := []runtime.MemoryKey{
		memoryKey(t, m, "profile", c1), // another principal
		{Principal: k.Principal, Slot: "profile", Scope: []runtime.ScopeValue{{Name: "metadata.customer_id", Value: "c2"}}},
		{Principal: k.Principal, Slot: "other", Scope: []runtime.ScopeValue{c1}},
		{Principal: k.Principal, Slot: "profile", Scope: []runtime.ScopeValue{{Name: "metadata.account", Value: "c1"}}},
		{Principal: k.Principal, Slot: "profile"},
		// Separators inside values must not make two keys one.
		{Principal: k.Principal, Slot: "profile", Scope: []runtime.ScopeValue{{Name: "metadata.customer_id", Value: "c1:x"}}},
		{Principal: k.Principal, Slot: "profile", Scope: []runtime.ScopeValue{{Name: "metadata.customer_id", Value: "c1"}, {Name: "session", Value: "x"}}},
	}
	for _, o := range others[1:] {
		t.Cleanup(func() { _ = m.Forget(context.Background(), o) })
	}
	remember(t, m, k, "mine", 100, 0)
	for _, o := range others {
		wantFacts(t, m, o, nil)
	}
	remember(t, m, others[0], "theirs", 100, 0)
	wantFacts(t, m, k, []string{"mine"})
}

func testMemoryTTL(t *testing.T, open NewStore) {
	m := memoryStore(t, open(t, defaults()))
	k := memoryKey(t, m, "short")
	ttl := time.Second
	if _, err := m.Remember(t.Context(), k, "one", 100, ttl); err != nil {
		t.Fatalf("Remember: %v", err)
	}
	time.Sleep(600 * time.Millisecond)
	// A write refreshes the TTL of every fact of the value.
	if _, err := m.Remember(t.Context(), k, "two", 100, ttl); err != nil {
		t.Fatalf("Remember: %v", err)
	}
	time.Sleep(600 * time.Millisecond) // past the first write's TTL, within the second's
	wantFacts(t, m, k, []string{"one", "two"})
	time.Sleep(ttl + 200*time.Millisecond)
	wantFacts(t, m, k, nil)
}
