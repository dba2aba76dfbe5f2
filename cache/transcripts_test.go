package cache

import (
	"testing"

	"github.com/switchboard-ai/switchboard/runtime"
)

func TestTranscriptsEvictLeastRecentlyUsed(t *testing.T) {
	c := newTranscripts(2)
	put := func(key string) {
		c.update(key, func(*transcript) *transcript { return &transcript{epoch: key} })
	}
	put("a")
	put("b")
	c.get("a") // b is now the least recently used
	put("c")
	for key, want := range map[string]bool{"a": true, "b": false, "c": true} {
		if got := c.get(key) != nil; got != want {
			t.Errorf("cached %q = %v, want %v", key, got, want)
		}
	}
	c.remove("a")
	if c.get("a") != nil {
		t.Error("removed entry still cached")
	}
}

func TestTranscriptsDisabled(t *testing.T) {
	c := newTranscripts(-1)
	c.update("a", func(*transcript) *transcript { return &transcript{} })
	if c.get("a") != nil {
		t.Error("a disabled cache returned an entry")
	}
}

func TestExtendNeverOverwritesAnotherReader(t *testing.T) {
	msg := func(s string) runtime.Message { return runtime.Message{Role: "user", Content: s} }
	base := &transcript{msgs: append(make([]runtime.Message, 0, 8), msg("0"))}
	cur := &transcript{msgs: extend(base, base, []runtime.Message{msg("1")})}
	// base is no longer current: extending it again must not write into
	// the array cur shares.
	other := extend(cur, base, []runtime.Message{msg("X")})
	if cur.msgs[1].Content != "1" || other[1].Content != "X" || len(base.msgs) != 1 {
		t.Errorf("cur = %v, other = %v", cur.msgs, other)
	}
}
