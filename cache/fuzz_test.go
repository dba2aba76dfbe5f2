package cache

import (
	"strings"
	"testing"

	"github.com/switchboard-ai/switchboard/runtime"
)

// FuzzKeysFor checks that distinct sessions never share Redis keys, and that
// every key of a session hashes by one brace-free tag, so a Cluster slot
// holds them all.
//
// The seed corpus in testdata/fuzz/FuzzKeysFor/ runs with plain `go test`;
// fuzz for longer with:
//
//	go test ./cache -run '^$' -fuzz '^FuzzKeysFor$' -fuzztime 10m
func FuzzKeysFor(f *testing.F) {
	f.Add("a:b", "c", "a", "b:c")
	f.Fuzz(func(t *testing.T, p1, id1, p2, id2 string) {
		a := runtime.SessionKey{Principal: p1, ID: id1}
		b := runtime.SessionKey{Principal: p2, ID: id2}
		ka, kb := keysFor(a), keysFor(b)
		if (a == b) != (ka.tag == kb.tag) {
			t.Fatalf("%+v and %+v: tags %q and %q", a, b, ka.tag, kb.tag)
		}
		for _, k := range []runtime.SessionKey{a, b} {
			keys := keysFor(k)
			inner, ok := strings.CutPrefix(keys.tag, "{")
			inner, ok2 := strings.CutSuffix(inner, "}")
			if !ok || !ok2 || strings.ContainsAny(inner, "{}") || strings.Count(inner, ":") != 1 {
				t.Fatalf("%+v: tag %q is not {principal:id} with one ':' and no inner brace", k, keys.tag)
			}
			seen := map[string]bool{}
			for _, key := range keys.list() {
				if seen[key] || hashTag(key) != inner {
					t.Fatalf("%+v: key %q repeated or hashing by %q, want %q", k, key, hashTag(key), inner)
				}
				seen[key] = true
			}
		}
		// A key of one session is never a key of another.
		if a != b {
			for _, key := range ka.list() {
				for _, other := range kb.list() {
					if key == other {
						t.Fatalf("%+v and %+v share key %q", a, b, key)
					}
				}
			}
		}
	})
}
