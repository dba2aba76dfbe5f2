package storetest

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-ai/switchboard/runtime"
)

// ReadOnly wraps s so that the test fails when a caller changes messages
// the store shared with it (see runtime.Store): what Acquire returns is
// compared with a copy taken then, at every Save and at the Release under
// its lease.
func ReadOnly(t testing.TB, s runtime.Store) runtime.Store {
	return &readOnly{Store: s, t: t, loaded: make(map[string]loaded)}
}

type readOnly struct {
	runtime.Store
	t testing.TB

	mu     sync.Mutex
	loaded map[string]loaded // by lease token
}

// loaded is what one Acquire returned, and a copy of it.
type loaded struct {
	shared, copy []runtime.Message
}

func (s *readOnly) Acquire(ctx context.Context, key runtime.SessionKey) (*runtime.Session, runtime.Lease, error) {
	sess, lease, err := s.Store.Acquire(ctx, key)
	if err != nil {
		return sess, lease, err
	}
	if cap(sess.Messages) != len(sess.Messages) {
		s.t.Errorf("Acquire(%v): messages have capacity %d past their length %d", key, cap(sess.Messages), len(sess.Messages))
	}
	s.mu.Lock()
	s.loaded[lease.Token] = loaded{shared: sess.Messages, copy: deepCopy(sess.Messages)}
	s.mu.Unlock()
	return sess, lease, nil
}

func (s *readOnly) Save(ctx context.Context, key runtime.SessionKey, lease runtime.Lease, w runtime.Write) (int64, error) {
	s.check(key, lease, w.Release)
	return s.Store.Save(ctx, key, lease, w)
}

func (s *readOnly) Release(ctx context.Context, key runtime.SessionKey, lease runtime.Lease) error {
	s.check(key, lease, true)
	return s.Store.Release(ctx, key, lease)
}

// check fails the test when the messages acquired under lease changed;
// done forgets them.
func (s *readOnly) check(key runtime.SessionKey, lease runtime.Lease, done bool) {
	s.mu.Lock()
	l, ok := s.loaded[lease.Token]
	if done {
		delete(s.loaded, lease.Token)
	}
	s.mu.Unlock()
	if !ok {
		return
	}
	if diff := cmp.Diff(l.copy, l.shared); diff != "" {
		s.t.Errorf("session %v: the run changed the messages it loaded (-loaded +now):\n%s", key, diff)
	}
}

// deepCopy returns a copy of msgs that shares no memory with it.
func deepCopy(msgs []runtime.Message) []runtime.Message {
	out := slices.Clone(msgs)
	for i := range out {
		m := &out[i]
		m.Parts = slices.Clone(m.Parts)
		m.ToolCalls = slices.Clone(m.ToolCalls)
		if m.Handoff != nil {
			h := *m.Handoff
			m.Handoff = &h
		}
	}
	return out
}
