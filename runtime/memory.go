package runtime

import (
	"github.com/switchboard-ai/switchboard/graphs"
)

// MemoryKeyFor returns the key of slot's value for a caller: the caller's
// principal, always (memory never crosses principals, even for a slot
// whose scope does not name principal), and value(name) for each of the
// slot's other scope names. When one of them has no value, or an empty one,
// missing names it and the caller has no such slot.
func MemoryKeyFor(slot *graphs.MemorySlot, principal string, value func(name string) string) (key MemoryKey, missing string) {
	key = MemoryKey{Principal: principal, Slot: slot.Name}
	for _, name := range slot.Scope {
		if name == graphs.ScopePrincipal {
			continue
		}
		v := value(name)
		if v == "" {
			return MemoryKey{}, name
		}
		key.Scope = append(key.Scope, ScopeValue{Name: name, Value: v})
	}
	return key, ""
}
