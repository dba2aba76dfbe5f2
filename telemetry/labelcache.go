package telemetry

import "sync"

// labelCache maps a label set to the metric children made for it. A typed
// map under a read lock is used instead of sync.Map because boxing a
// struct key into an interface would allocate on every lookup. The zero
// value is ready to use.
type labelCache[K comparable, V any] struct {
	mu sync.RWMutex
	m  map[K]V
}

// get returns the value cached for k, calling newValue once to create it.
func (c *labelCache[K, V]) get(k K, newValue func() V) V {
	c.mu.RLock()
	v, ok := c.m[k]
	c.mu.RUnlock()
	if ok {
		return v
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.m[k]; ok {
		return v
	}
	if c.m == nil {
		c.m = make(map[K]V)
	}
	v = newValue()
	c.m[k] = v
	return v
}
