package cache

import (
	"strings"
	"testing"

	"github.com/switchboard-ai/switchboard/runtime"
)

func TestKeysFor(t *testing.T) {
	tests := []struct {
		key  runtime.SessionKey
		want string // the msgs key
	}{
		{runtime.SessionKey{Principal: "acme", ID: "abc-123_x.y"}, "sb:{acme:abc-123_x.y}:msgs"},
		{runtime.SessionKey{Principal: "", ID: "s"}, "sb:{:s}:msgs"},
		{runtime.SessionKey{Principal: "a:b", ID: "c"}, "sb:{a%3Ab:c}:msgs"},
		{runtime.SessionKey{Principal: "a", ID: "b:c"}, "sb:{a:b%3Ac}:msgs"},
		{runtime.SessionKey{Principal: "{x}", ID: "}"}, "sb:{%7Bx%7D:%7D}:msgs"},
		{runtime.SessionKey{Principal: "100%", ID: "s"}, "sb:{100%25:s}:msgs"},
		{runtime.SessionKey{Principal: "é", ID: "s"}, "sb:{%C3%A9:s}:msgs"},
	}
	for _, tc := range tests {
		k := keysFor(tc.key)
		if k.msgs != tc.want {
			t.Errorf("keysFor(%+v).msgs = %q, want %q", tc.key, k.msgs, tc.want)
		}
		// All keys of a session hash by the same tag, which holds no brace.
		inner := strings.TrimSuffix(strings.TrimPrefix(k.tag, "{"), "}")
		if strings.ContainsAny(inner, "{}") {
			t.Errorf("keysFor(%+v): tag %q holds a brace", tc.key, k.tag)
		}
		for _, key := range k.list() {
			if hashTag(key) != inner {
				t.Errorf("keysFor(%+v): key %q hashes by %q, want %q", tc.key, key, hashTag(key), inner)
			}
		}
	}
}

// hashTag returns the part of key Redis Cluster hashes.
func hashTag(key string) string {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return key
	}
	end := strings.IndexByte(key[open+1:], '}')
	if end <= 0 {
		return key
	}
	return key[open+1 : open+1+end]
}

func TestKeysForIsInjective(t *testing.T) {
	parts := []string{"", "a", "b", ":", "a:", ":b", "a:b", "%", "%3A", "{", "}", "a%3Ab", "b:c", "c"}
	seen := map[string]runtime.SessionKey{}
	for _, p := range parts {
		for _, id := range parts {
			k := runtime.SessionKey{Principal: p, ID: id}
			tag := keysFor(k).tag
			if other, ok := seen[tag]; ok {
				t.Fatalf("%+v and %+v share keys %q", k, other, tag)
			}
			seen[tag] = k
		}
	}
}
