package runtime

import (
	"context"
	"errors"
	"time"
)

// MemoryKey names one value of a memory slot (CONTRACT §9). The principal
// is always part of it, whether or not the slot's scope names it: memory
// never crosses principals, as sessions never do. Scope holds the values of
// the slot's other scope names, in the slot's order, with their names, so
// that a slot whose scope changes never reads another scope's facts.
type MemoryKey struct {
	Principal string
	Slot      string
	Scope     []ScopeValue
}

// ScopeValue is the value of one scope name of a slot: "session" and the
// session id, or "metadata.customer_id" and the request's customer_id.
type ScopeValue struct {
	Name  string
	Value string
}

// MemoryStore keeps memory slots' facts; the session store's backends
// implement it (package cache), so that memory is shared by every gateway
// on one Redis. Every method is bounded by the store's own timeout and
// returns an error wrapping ErrStoreUnavailable when it cannot reach its
// backend.
type MemoryStore interface {
	// Remember appends fact to key's facts, then drops the oldest facts
	// while their bytes (the sum of the facts' lengths) exceed maxBytes,
	// and keeps key's facts for ttl from now: one atomic round trip. It
	// returns how many facts were dropped. A fact longer than maxBytes on
	// its own is ErrFactTooLarge, and nothing is stored.
	Remember(ctx context.Context, key MemoryKey, fact string, maxBytes int, ttl time.Duration) (dropped int, err error)
	// Recall returns key's facts, oldest first; none when nothing is
	// remembered.
	Recall(ctx context.Context, key MemoryKey) ([]string, error)
	// Forget drops key's facts; forgetting nothing is not an error.
	Forget(ctx context.Context, key MemoryKey) error
}

// ErrFactTooLarge is returned by MemoryStore.Remember for a fact longer
// than the slot's max_bytes on its own.
var ErrFactTooLarge = errors.New("fact too large")
