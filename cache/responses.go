package cache

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/switchboard-ai/switchboard/runtime"
)

// Stored responses (the Responses API's `store: true`) are records the
// gateway writes next to the sessions they point into: opaque bytes under a
// response id, scoped to a principal, living session_ttl from their write
// like the sessions themselves. The store does not read them.

// responseKey names one stored response.
type responseKey struct {
	principal, id string
}

// memRecord is a stored response in the memory store.
type memRecord struct {
	data    []byte
	expires time.Time
}

// PutResponse stores record under (principal, id), replacing any record there.
func (m *Memory) PutResponse(ctx context.Context, principal, id string, record []byte) error {
	if err := m.begin(ctx, "put response in"); err != nil {
		return err
	}
	defer m.mu.Unlock()
	m.responses[responseKey{principal, id}] = &memRecord{data: slices.Clone(record), expires: time.Now().Add(m.ttl)}
	return nil
}

// GetResponse returns the record under (principal, id); runtime.ErrNotFound
// when there is none.
func (m *Memory) GetResponse(ctx context.Context, principal, id string) ([]byte, error) {
	if err := m.begin(ctx, "get response from"); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	k := responseKey{principal, id}
	r, ok := m.responses[k]
	if ok && !time.Now().Before(r.expires) {
		delete(m.responses, k)
		ok = false
	}
	if !ok {
		return nil, fmt.Errorf("get response: %w", runtime.ErrNotFound)
	}
	return slices.Clone(r.data), nil
}

// DeleteResponse forgets the record under (principal, id);
// runtime.ErrNotFound when there was none.
func (m *Memory) DeleteResponse(ctx context.Context, principal, id string) error {
	if err := m.begin(ctx, "delete response from"); err != nil {
		return err
	}
	defer m.mu.Unlock()
	k := responseKey{principal, id}
	r, ok := m.responses[k]
	delete(m.responses, k)
	if !ok || !time.Now().Before(r.expires) {
		return fmt.Errorf("delete response: %w", runtime.ErrNotFound)
	}
	return nil
}

// sweepResponses drops expired records. The caller holds m.mu.
func (m *Memory) sweepResponses(now time.Time) {
	for k, r := range m.responses {
		if !now.Before(r.expires) {
			delete(m.responses, k)
		}
	}
}

// responseKeyFor is a stored response's Redis key. Principal and id are
// escaped and joined by ':', which escaping never leaves (see keysFor).
func responseKeyFor(principal, id string) string {
	return "sb:resp:" + escape(principal) + ":" + escape(id)
}

// PutResponse stores record under (principal, id) for session_ttl.
func (s *Redis) PutResponse(ctx context.Context, principal, id string, record []byte) error {
	bctx, cancel := s.bound(ctx)
	defer cancel()
	if err := s.client.Set(bctx, responseKeyFor(principal, id), record, s.opts.SessionTTL).Err(); err != nil {
		return fail(ctx, "put response", err)
	}
	return nil
}

// GetResponse returns the record under (principal, id); runtime.ErrNotFound
// when there is none.
func (s *Redis) GetResponse(ctx context.Context, principal, id string) ([]byte, error) {
	bctx, cancel := s.bound(ctx)
	defer cancel()
	b, err := s.client.Get(bctx, responseKeyFor(principal, id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("get response: %w", runtime.ErrNotFound)
	}
	if err != nil {
		return nil, fail(ctx, "get response", err)
	}
	return b, nil
}

// DeleteResponse forgets the record under (principal, id);
// runtime.ErrNotFound when there was none.
func (s *Redis) DeleteResponse(ctx context.Context, principal, id string) error {
	bctx, cancel := s.bound(ctx)
	defer cancel()
	n, err := s.client.Del(bctx, responseKeyFor(principal, id)).Result()
	if err != nil {
		return fail(ctx, "delete response", err)
	}
	if n == 0 {
		return fmt.Errorf("delete response: %w", runtime.ErrNotFound)
	}
	return nil
}
