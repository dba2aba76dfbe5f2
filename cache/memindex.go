package cache

import (
	"container/list"
	"context"
	"time"

	"github.com/switchboard-ai/switchboard/runtime"
)

// The memory store lists a principal's sessions from a list kept in write
// order: a save moves its session to the front (O(1)), a delete or expiry
// takes it out, and List walks from the front. Entries of sessions that
// expired since are skipped and dropped by the walk that finds them.

// memIndex is one principal's sessions, the most recently written first.
type memIndex struct {
	order list.List // of session ids
	at    map[string]*list.Element
}

// touch moves key's session to the front of its principal's list. The
// caller holds m.mu.
func (m *Memory) touch(key runtime.SessionKey) {
	ix := m.index[key.Principal]
	if ix == nil {
		ix = &memIndex{at: make(map[string]*list.Element)}
		m.index[key.Principal] = ix
	}
	if e, ok := ix.at[key.ID]; ok {
		ix.order.MoveToFront(e)
		return
	}
	ix.at[key.ID] = ix.order.PushFront(key.ID)
}

// unindex takes key's session out of its principal's list. The caller
// holds m.mu.
func (m *Memory) unindex(key runtime.SessionKey) {
	ix := m.index[key.Principal]
	if ix == nil {
		return
	}
	if e, ok := ix.at[key.ID]; ok {
		ix.order.Remove(e)
		delete(ix.at, key.ID)
	}
	if ix.order.Len() == 0 {
		delete(m.index, key.Principal)
	}
}

// drop forgets key's session and its place in the list. The caller holds
// m.mu.
func (m *Memory) drop(key runtime.SessionKey) {
	delete(m.sessions, key)
	m.unindex(key)
}

// List returns up to limit of principal's live sessions, the most recently
// written first.
func (m *Memory) List(ctx context.Context, principal string, limit int) ([]runtime.SessionInfo, error) {
	if err := m.begin(ctx, "list"); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	ix := m.index[principal]
	if ix == nil || limit <= 0 {
		return []runtime.SessionInfo{}, nil
	}
	now := time.Now()
	out := make([]runtime.SessionInfo, 0, min(limit, ix.order.Len()))
	for e := ix.order.Front(); e != nil && len(out) < limit; {
		next := e.Next()
		key := runtime.SessionKey{Principal: principal, ID: e.Value.(string)}
		s := m.sessions[key]
		if s == nil || s.expire(now) || s.version == 0 {
			// Gone, or expired with its lock still held: not listed.
			if s != nil && s.version == 0 && s.token == "" {
				delete(m.sessions, key)
			}
			ix.order.Remove(e)
			delete(ix.at, key.ID)
			e = next
			continue
		}
		out = append(out, runtime.SessionInfo{ID: key.ID, ActiveAgent: s.agent, Version: s.version, UpdatedAt: s.updated})
		e = next
	}
	if ix.order.Len() == 0 {
		delete(m.index, principal)
	}
	return out, nil
}
