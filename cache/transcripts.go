package cache

import (
	"container/list"
	"sync"

	"github.com/switchboard-ai/switchboard/runtime"
)

// transcript is what this process last saw of, or wrote to, a session. It is
// immutable once cached: readers take one without the lock and only read
// msgs[:len(msgs)].
type transcript struct {
	epoch   string
	version int64
	msgs    []runtime.Message
}

// transcripts is the Redis store's per-process transcript cache, a bounded
// LRU keyed by session hash tag. With it a run sends Redis its cached epoch
// and count and gets back only the messages it lacks, so loading turn 200
// of a conversation costs about what loading turn 2 does. A nil
// *transcripts is a disabled cache.
type transcripts struct {
	max int

	mu      sync.Mutex
	order   *list.List // of *cacheItem, most recently used first
	entries map[string]*list.Element
}

type cacheItem struct {
	key string
	t   *transcript
}

// newTranscripts returns a cache of at most max sessions; nil when max < 1.
func newTranscripts(max int) *transcripts {
	if max < 1 {
		return nil
	}
	return &transcripts{max: max, order: list.New(), entries: make(map[string]*list.Element)}
}

// get returns key's transcript, or nil.
func (c *transcripts) get(key string) *transcript {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok {
		return nil
	}
	c.order.MoveToFront(e)
	return e.Value.(*cacheItem).t
}

// update replaces key's transcript with next(current); a nil result drops it.
// next runs under the cache's lock, so that it sees the transcript it
// replaces. It may append to current.msgs in place (see extend).
func (c *transcripts) update(key string, next func(cur *transcript) *transcript) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var cur *transcript
	e, ok := c.entries[key]
	if ok {
		cur = e.Value.(*cacheItem).t
	}
	t := next(cur)
	switch {
	case t == nil && ok:
		c.order.Remove(e)
		delete(c.entries, key)
	case t == nil:
	case ok:
		e.Value.(*cacheItem).t = t
		c.order.MoveToFront(e)
	default:
		c.entries[key] = c.order.PushFront(&cacheItem{key: key, t: t})
		if c.order.Len() > c.max {
			last := c.order.Back()
			c.order.Remove(last)
			delete(c.entries, last.Value.(*cacheItem).key)
		}
	}
}

// remove drops key's transcript.
func (c *transcripts) remove(key string) {
	c.update(key, func(*transcript) *transcript { return nil })
}

// extend returns the messages of base (which holds `from` messages) followed
// by tail. When base is still the cached transcript cur it appends in place,
// saving a copy of the whole transcript per turn: readers of base only read
// its first `from` messages, and since cur is then replaced, no one else ever
// appends to that array past `from`. Otherwise it copies. Call it from an
// update's next function; tail must already be the cache's own copy.
func extend(cur, base *transcript, tail []runtime.Message) []runtime.Message {
	if cur == base {
		return append(base.msgs, tail...)
	}
	return append(append(make([]runtime.Message, 0, len(base.msgs)+len(tail)), base.msgs...), tail...)
}
