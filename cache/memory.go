package cache

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/switchboard-ai/switchboard/internal/freshstack"
	"github.com/switchboard-ai/switchboard/runtime"
)

// Memory is the in-memory session store, the default (memory://). It serves
// one gateway process: sessions die with it. It is safe for concurrent use.
// Expired sessions are dropped when touched and by a periodic sweep that
// Close stops.
type Memory struct {
	ttl, lease time.Duration
	maxBytes   int64

	mu       sync.Mutex
	sessions map[runtime.SessionKey]*memSession
	// responses are the stored responses (responses.go).
	responses map[responseKey]*memRecord
	// facts are memory slots' facts (facts.go), by factsKey.
	facts map[string]*memFacts
	// index lists each principal's sessions in write order (memindex.go).
	index  map[string]*memIndex
	closed bool

	stop chan struct{} // closed by Close to end the sweeper
	done chan struct{} // closed by the sweeper when it returns
}

var _ runtime.Store = (*Memory)(nil)

// memSession is one session's state and lock. version 0 means no state: the
// session was never written, or it expired, while its lock may be held.
type memSession struct {
	msgs    []runtime.Message
	bytes   int64 // of msgs' JSON, for max_session_bytes
	agent   string
	version int64
	expires time.Time
	updated time.Time // of the last write
	// approvals are the session's approvals, replaced whole by a save.
	approvals []runtime.Approval

	token       string // empty: unlocked
	lockExpires time.Time
}

// errClosed is returned, wrapped in ErrStoreUnavailable, after Close.
var errClosed = errors.New("store closed")

// NewMemory returns an in-memory store; it uses opts.SessionTTL and
// opts.LockLease (the URL is not read).
func NewMemory(opts Options) *Memory {
	opts.init()
	m := &Memory{
		ttl:       opts.SessionTTL,
		lease:     opts.LockLease,
		maxBytes:  opts.MaxSessionBytes,
		sessions:  make(map[runtime.SessionKey]*memSession),
		responses: make(map[responseKey]*memRecord),
		facts:     make(map[string]*memFacts),
		index:     make(map[string]*memIndex),
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
	}
	go m.sweep(min(opts.SessionTTL, time.Minute))
	return m
}

// sweep drops expired sessions every interval, so that sessions nobody asks
// for again do not pile up.
func (m *Memory) sweep(interval time.Duration) {
	defer close(m.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case now := <-t.C:
			m.mu.Lock()
			for k, s := range m.sessions {
				if s.expire(now) {
					m.drop(k)
				}
			}
			m.sweepResponses(now)
			m.sweepFacts(now)
			m.mu.Unlock()
		}
	}
}

// expire forgets state and lock past their time and reports whether
// nothing is left of the session.
func (s *memSession) expire(now time.Time) bool {
	if s.version > 0 && !now.Before(s.expires) {
		*s = memSession{token: s.token, lockExpires: s.lockExpires}
	}
	if s.token != "" && !now.Before(s.lockExpires) {
		s.token = ""
	}
	return s.version == 0 && s.token == ""
}

// session returns key's live session, creating an empty one when create is
// set (else nil when there is none). The caller holds m.mu.
func (m *Memory) session(key runtime.SessionKey, now time.Time, create bool) *memSession {
	s := m.sessions[key]
	if s != nil && s.expire(now) {
		m.drop(key)
		s = nil
	}
	if s == nil && create {
		s = &memSession{}
		m.sessions[key] = s
	}
	return s
}

// begin locks m for one operation; it fails when ctx is done or m closed.
func (m *Memory) begin(ctx context.Context, op string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s session: %w", op, err)
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return fmt.Errorf("%s session: %w: %w", op, runtime.ErrStoreUnavailable, errClosed)
	}
	return nil
}

// Acquire takes key's lock and returns its state.
func (m *Memory) Acquire(ctx context.Context, key runtime.SessionKey) (*runtime.Session, runtime.Lease, error) {
	if err := m.begin(ctx, "acquire"); err != nil {
		return nil, runtime.Lease{}, err
	}
	defer m.mu.Unlock()
	now := time.Now()
	s := m.session(key, now, true)
	if s.token != "" {
		return nil, runtime.Lease{}, fmt.Errorf("acquire session: %w", runtime.ErrBusy)
	}
	s.token = rand.Text()
	s.lockExpires = now.Add(m.lease)
	return s.snapshot(), runtime.Lease{Token: s.token, TTL: m.lease}, nil
}

// snapshot returns s's state as it stands: its messages are shared, clipped
// so that later saves, which append past them, do not show through.
func (s *memSession) snapshot() *runtime.Session {
	return &runtime.Session{Messages: slices.Clip(s.msgs), ActiveAgent: s.agent, Version: s.version, Approvals: slices.Clone(s.approvals)}
}

// holds reports whether lease holds s's lock.
func (s *memSession) holds(lease runtime.Lease) bool {
	return s != nil && s.token != "" && s.token == lease.Token
}

// Save writes w under lease and returns the new version; with w.Release it
// then gives the lock back.
func (m *Memory) Save(ctx context.Context, key runtime.SessionKey, lease runtime.Lease, w runtime.Write) (int64, error) {
	// The write's size is measured before the store's lock is taken: it
	// needs nothing the lock guards, and encoding the messages (aside, on
	// a goroutine of its own) would hold every other call of the store.
	add, err := jsonSize(w.Messages)
	if err != nil {
		return 0, fmt.Errorf("save session: %w", err)
	}
	if err := m.begin(ctx, "save"); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	now := time.Now()
	s := m.session(key, now, false)
	if !s.holds(lease) {
		return 0, fmt.Errorf("save session: %w", runtime.ErrLeaseLost)
	}
	size := s.bytes
	if w.Replace {
		size = 0
	}
	if size+add > m.maxBytes {
		return 0, fmt.Errorf("save session: %w: %d bytes, over the limit of %d", runtime.ErrSessionTooLarge, size+add, m.maxBytes)
	}
	if w.Replace {
		s.msgs = cloneMessages(w.Messages)
	} else {
		s.msgs = appendClones(s.msgs, w.Messages)
	}
	s.bytes = size + add
	s.agent = w.ActiveAgent
	if w.SetApprovals {
		s.approvals = slices.Clone(w.Approvals)
	}
	s.version++
	s.expires = now.Add(m.ttl)
	s.updated = now
	m.touch(key)
	if w.Release {
		s.token = "" // the session now has state, so it stays
	}
	return s.version, nil
}

// Renew extends lease by the store's lock lease.
func (m *Memory) Renew(ctx context.Context, key runtime.SessionKey, lease runtime.Lease) error {
	if err := m.begin(ctx, "renew"); err != nil {
		return err
	}
	defer m.mu.Unlock()
	now := time.Now()
	s := m.session(key, now, false)
	if !s.holds(lease) {
		return fmt.Errorf("renew session lease: %w", runtime.ErrLeaseLost)
	}
	s.lockExpires = now.Add(m.lease)
	return nil
}

// Release gives key's lock back if lease still holds it.
func (m *Memory) Release(ctx context.Context, key runtime.SessionKey, lease runtime.Lease) error {
	if err := m.begin(ctx, "release"); err != nil {
		return err
	}
	defer m.mu.Unlock()
	now := time.Now()
	if s := m.session(key, now, false); s.holds(lease) {
		s.token = ""
		if s.expire(now) {
			m.drop(key)
		}
	}
	return nil
}

// Load returns key's state; ErrNotFound when it has none.
func (m *Memory) Load(ctx context.Context, key runtime.SessionKey) (*runtime.Session, error) {
	if err := m.begin(ctx, "load"); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	s := m.session(key, time.Now(), false)
	if s == nil || s.version == 0 {
		return nil, fmt.Errorf("load session: %w", runtime.ErrNotFound)
	}
	return s.snapshot(), nil
}

// Delete forgets key, its lock included, as the Redis store does.
func (m *Memory) Delete(ctx context.Context, key runtime.SessionKey) error {
	if err := m.begin(ctx, "delete"); err != nil {
		return err
	}
	defer m.mu.Unlock()
	m.drop(key)
	return nil
}

// Ping fails only after Close.
func (m *Memory) Ping(ctx context.Context) error {
	if err := m.begin(ctx, "ping"); err != nil {
		return err
	}
	m.mu.Unlock()
	return nil
}

// Close stops the sweeper and drops every session; later calls fail with
// ErrStoreUnavailable. Closing twice is not an error.
func (m *Memory) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.sessions = nil
	m.index = nil
	m.responses = nil
	m.facts = nil
	m.mu.Unlock()
	close(m.stop)
	<-m.done
	return nil
}

// jsonSize is the size of msgs' JSON, as the Redis store stores them.
// encoding/json goes 2.5 KB deep, which from a save inside the run loop is
// past the 7 KB that keeps a stream's goroutine at an 8 KB stack: aside
// (freshstack, and Redis.Acquire).
func jsonSize(msgs []runtime.Message) (n int64, err error) {
	freshstack.Run(func() { n, err = messagesSize(msgs) })
	return n, err
}

// messagesSize is jsonSize, on the caller's stack.
func messagesSize(msgs []runtime.Message) (int64, error) {
	var n int64
	for i := range msgs {
		b, err := json.Marshal(msgs[i])
		if err != nil {
			return 0, fmt.Errorf("encode message %d: %w", i, err)
		}
		n += int64(len(b))
	}
	return n, nil
}
