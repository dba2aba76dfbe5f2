package cache

import (
	"testing"

	"github.com/switchboard-ai/switchboard/runtime"
)

// A slot value's keys hash by one non-empty tag (Redis Cluster hashes a
// whole key whose tag is "{}"), and no two slot values share keys.
func TestFactsKey(t *testing.T) {
	parts := []string{"", "a", ":", "=", "a=b", "%3D", "{", "}", "a:b"}
	seen := map[string]runtime.MemoryKey{}
	for _, p := range parts {
		for _, slot := range []string{"s", "s:a"} {
			for _, v := range parts {
				k := runtime.MemoryKey{Principal: p, Slot: slot, Scope: []runtime.ScopeValue{{Name: "metadata.a", Value: v}}}
				name := factsKey(k)
				if tag := hashTag(name); tag == "" || tag == name || hashTag(name+":w") != tag {
					t.Errorf("%+v: key %q hashes by %q", k, name, tag)
				}
				if other, dup := seen[name]; dup {
					t.Fatalf("%+v and %+v share key %q", k, other, name)
				}
				seen[name] = k
			}
		}
	}
}
