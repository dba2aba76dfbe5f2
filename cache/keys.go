package cache

import (
	"strings"

	"github.com/switchboard-ai/switchboard/runtime"
)

// sessionKeys are the Redis keys of one session. They share the hash tag
// {<principal>:<id>}, so one Cluster slot holds them all and a Lua script
// may touch them together.
type sessionKeys struct {
	tag  string // "{<principal>:<id>}", also the transcript cache's key
	msgs string
	meta string
	lock string
}

// keysFor names key's Redis keys. Principal and id are escaped (see escape)
// and joined by ':', which escaping never leaves, so that no two
// (principal, id) pairs share keys: ("a:b", "c") and ("a", "b:c") differ.
func keysFor(key runtime.SessionKey) sessionKeys {
	tag := "{" + escape(key.Principal) + ":" + escape(key.ID) + "}"
	return sessionKeys{
		tag:  tag,
		msgs: "sb:" + tag + ":msgs",
		meta: "sb:" + tag + ":meta",
		lock: "sb:" + tag + ":lock",
	}
}

// list returns the keys in the order the scripts expect: KEYS[1] msgs,
// KEYS[2] meta, KEYS[3] lock.
func (k sessionKeys) list() []string {
	return []string{k.msgs, k.meta, k.lock}
}

// escape percent-encodes every byte of s outside [A-Za-z0-9._-]. The result
// is unambiguous (the '%' itself is escaped) and holds neither ':' nor the
// braces that would cut a Redis hash tag short. Session ids only escape
// their ':'; principals are config names and may hold anything.
func escape(s string) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if !plain(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s) + 2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if plain(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// plain reports whether escape keeps c as is.
func plain(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '.' || c == '_' || c == '-'
}
