// Package storetest is the suite every runtime.Store backend must pass:
//
//	func TestMyStore(t *testing.T) {
//		storetest.Run(t, func(t *testing.T, cfg storetest.Config) runtime.Store {
//			s := open(cfg.SessionTTL, cfg.LockLease)
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// List (the session list) is covered too: newest write first, limits,
// isolation, and neither deleted nor expired sessions listed.
//
// Each test works under its own random principal and deletes its sessions
// when it ends, so that backends sharing a server (Redis) can run it
// concurrently. Some tests wait for leases and TTLs of a few hundred
// milliseconds to pass; the tests run in parallel.
package storetest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-ai/switchboard/runtime"
)

// Config is what a test needs of the store it opens.
type Config struct {
	// SessionTTL is the store's session TTL.
	SessionTTL time.Duration
	// LockLease is the store's lock lease.
	LockLease time.Duration
	// MaxSessionBytes is the store's max_session_bytes; 0 is its default.
	MaxSessionBytes int64
}

// NewStore opens a store configured with cfg for one test and closes it when
// the test ends (t.Cleanup); closing it twice must not fail. Every store
// opened for one test must see the same sessions, as two gateways on one
// Redis do: a backend that keeps sessions in process returns the same store
// again.
type NewStore func(t *testing.T, cfg Config) runtime.Store

// defaults returns a Config long enough that no lease or session expires by
// accident.
func defaults() Config {
	return Config{SessionTTL: time.Minute, LockLease: 30 * time.Second}
}

// Run runs the suite against the stores newStore opens.
func Run(t *testing.T, newStore NewStore) {
	tests := []struct {
		name string
		run  func(t *testing.T, open NewStore)
	}{
		{"NewSessionIsEmpty", testNewSession},
		{"SaveAppendsInOrder", testAppend},
		{"Replace", testReplace},
		{"RoundTripIsExact", testRoundTrip},
		{"CopiesInSharesOut", testCopies},
		{"SecondAcquireIsBusy", testBusy},
		{"ReleasingSave", testReleasingSave},
		{"ExpiredLeaseIsFenced", testLeaseExpiry},
		{"RenewKeepsLease", testRenew},
		{"LoadAndDelete", testLoadDelete},
		{"PrincipalsAreIsolated", testIsolation},
		{"WriteRefreshesTTL", testTTL},
		{"TwoGatewaysAlternate", testTwoGateways},
		{"ConcurrentTurns", testConcurrency},
		{"PingAndClose", testPingClose},
		{"SessionSizeIsBounded", testSessionTooLarge},
		{"MemoryFactsAreShared", testMemoryFacts},
		{"MemoryKeepsMaxBytes", testMemoryTrim},
		{"MemoryIsIsolated", testMemoryIsolation},
		{"MemoryWriteRefreshesTTL", testMemoryTTL},
		{"ListNewestFirst", testListNewestFirst},
		{"ListLimit", testListLimit},
		{"ListIsolation", testListIsolation},
		{"ListForgetsDeletedAndExpired", testListForgets},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, newStore)
		})
	}
}

// sessionKey returns a key under a principal of its own and deletes the
// session from s when the test ends.
func sessionKey(t *testing.T, s runtime.Store, id string) runtime.SessionKey {
	t.Helper()
	return keyOf(t, s, principal(), id)
}

// principal returns a principal no other test uses.
func principal() string { return "storetest-" + rand.Text() }

// keyOf returns {p, id} and deletes the session from s when the test ends.
func keyOf(t *testing.T, s runtime.Store, p, id string) runtime.SessionKey {
	t.Helper()
	k := runtime.SessionKey{Principal: p, ID: id}
	t.Cleanup(func() {
		if err := s.Delete(context.Background(), k); err != nil {
			t.Errorf("clean up %v: %v", k, err)
		}
	})
	return k
}

// text returns a message with role and content.
func text(role, content string) runtime.Message {
	return runtime.Message{Role: role, Content: content}
}

// acquire takes k's lock or fails the test.
func acquire(t *testing.T, s runtime.Store, k runtime.SessionKey) (*runtime.Session, runtime.Lease) {
	t.Helper()
	sess, lease, err := s.Acquire(t.Context(), k)
	if err != nil {
		t.Fatalf("Acquire(%v): %v", k, err)
	}
	return sess, lease
}

// save writes w under lease, fails the test on error, and checks that the
// version is want.
func save(t *testing.T, s runtime.Store, k runtime.SessionKey, lease runtime.Lease, w runtime.Write, want int64) {
	t.Helper()
	v, err := s.Save(t.Context(), k, lease, w)
	if err != nil {
		t.Fatalf("Save(%v): %v", k, err)
	}
	if v != want {
		t.Fatalf("Save(%v) = version %d, want %d", k, v, want)
	}
}

// release gives k's lock back or fails the test.
func release(t *testing.T, s runtime.Store, k runtime.SessionKey, lease runtime.Lease) {
	t.Helper()
	if err := s.Release(t.Context(), k, lease); err != nil {
		t.Fatalf("Release(%v): %v", k, err)
	}
}

// write saves msgs as one step in its own acquire/release.
func write(t *testing.T, s runtime.Store, k runtime.SessionKey, w runtime.Write) int64 {
	t.Helper()
	sess, lease := acquire(t, s, k)
	save(t, s, k, lease, w, sess.Version+1)
	release(t, s, k, lease)
	return sess.Version + 1
}

// wantSession checks that s loads k as want, through Load and Acquire.
func wantSession(t *testing.T, s runtime.Store, k runtime.SessionKey, want *runtime.Session) {
	t.Helper()
	got, err := s.Load(t.Context(), k)
	if err != nil {
		t.Fatalf("Load(%v): %v", k, err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("Load(%v) mismatch (-want +got):\n%s", k, diff)
	}
	got, lease := acquire(t, s, k)
	release(t, s, k, lease)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("Acquire(%v) mismatch (-want +got):\n%s", k, diff)
	}
}

// wantErr checks that err wraps want and no other store sentinel.
func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: error %v, want %v", what, err, want)
	}
	for _, other := range []error{runtime.ErrBusy, runtime.ErrLeaseLost, runtime.ErrNotFound, runtime.ErrStoreUnavailable} {
		if other != want && errors.Is(err, other) {
			t.Fatalf("%s: error %v is also %v", what, err, other)
		}
	}
}

// numbered returns n user messages "<prefix> 0" ... "<prefix> n-1".
func numbered(prefix string, n int) []runtime.Message {
	msgs := make([]runtime.Message, n)
	for i := range msgs {
		msgs[i] = text(runtime.RoleUser, fmt.Sprintf("%s %d", prefix, i))
	}
	return msgs
}
