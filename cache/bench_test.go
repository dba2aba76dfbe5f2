package cache

import (
	"fmt"
	"strings"
	"testing"

	"github.com/switchboard-ai/switchboard/runtime"
)

// benchTurn is one turn's messages of a typical size.
func benchTurn(i int) []runtime.Message {
	return []runtime.Message{
		{Role: runtime.RoleUser, Content: fmt.Sprintf("question %d: %s", i, strings.Repeat("lorem ipsum ", 20))},
		{Role: runtime.RoleAssistant, Content: fmt.Sprintf("answer %d: %s", i, strings.Repeat("dolor sit amet ", 30))},
	}
}

// benchSave saves one turn per iteration under one lease.
func benchSave(b *testing.B, s runtime.Store) {
	k := testKey(b, s)
	_, lease, err := s.Acquire(b.Context(), k)
	if err != nil {
		b.Fatalf("Acquire: %v", err)
	}
	w := runtime.Write{Messages: benchTurn(0), ActiveAgent: "triage"}
	for b.Loop() {
		if _, err := s.Save(b.Context(), k, lease, w); err != nil {
			b.Fatalf("Save: %v", err)
		}
	}
}

func BenchmarkMemorySave(b *testing.B) {
	s := NewMemory(Options{})
	b.Cleanup(func() { _ = s.Close() })
	benchSave(b, s)
}

func BenchmarkRedisSave(b *testing.B) {
	benchSave(b, openRedis(b, Options{}))
}

// BenchmarkRedisAcquireLongSession starts a turn (Acquire, Release) of a
// 200-message session, next to a 2-message one, with the transcript cache
// (what a gateway does) and without it (reading the whole transcript every
// turn). With the cache, the two sizes should cost about the same.
func BenchmarkRedisAcquireLongSession(b *testing.B) {
	for _, size := range []int{200, 2} {
		for _, bc := range []struct {
			name    string
			entries int
		}{{"cached", 0}, {"uncached", -1}} {
			b.Run(fmt.Sprintf("messages=%d/%s", size, bc.name), func(b *testing.B) {
				benchAcquire(b, openRedis(b, Options{CacheEntries: bc.entries}), size)
			})
		}
	}
}

// benchAcquire starts a turn of a session of size messages per iteration.
func benchAcquire(b *testing.B, s *Redis, size int) {
	k := testKey(b, s)
	var msgs []runtime.Message
	for i := range size / 2 {
		msgs = append(msgs, benchTurn(i)...)
	}
	if _, err := turn(b, s, k, runtime.Write{Messages: msgs}); err != nil {
		b.Fatalf("turn: %v", err)
	}
	for b.Loop() {
		sess, lease, err := s.Acquire(b.Context(), k)
		if err != nil {
			b.Fatalf("Acquire: %v", err)
		}
		if len(sess.Messages) != size {
			b.Fatalf("Acquire loaded %d messages, want %d", len(sess.Messages), size)
		}
		if err := s.Release(b.Context(), k, lease); err != nil {
			b.Fatalf("Release: %v", err)
		}
	}
}

// BenchmarkRedisTurn makes a session turn's store calls per iteration:
// Acquire, then a Save of the turn and the release, either as two calls
// (three round trips in all) or as one Save with Write.Release (two).
func BenchmarkRedisTurn(b *testing.B) {
	for _, inSave := range []bool{false, true} {
		b.Run(fmt.Sprintf("release-in-save=%v", inSave), func(b *testing.B) {
			s := openRedis(b, Options{})
			k := testKey(b, s)
			w := runtime.Write{Messages: benchTurn(0), ActiveAgent: "triage", Release: inSave}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if i++; i%50 == 0 { // keep the session short
					b.StopTimer()
					if err := s.Delete(b.Context(), k); err != nil {
						b.Fatalf("Delete: %v", err)
					}
					b.StartTimer()
				}
				_, lease, err := s.Acquire(b.Context(), k)
				if err != nil {
					b.Fatalf("Acquire: %v", err)
				}
				if _, err := s.Save(b.Context(), k, lease, w); err != nil {
					b.Fatalf("Save: %v", err)
				}
				if !inSave {
					if err := s.Release(b.Context(), k, lease); err != nil {
						b.Fatalf("Release: %v", err)
					}
				}
			}
		})
	}
}

// BenchmarkCloneMessages copies a 400-message transcript, as a Replace of
// a 200-turn session does.
func BenchmarkCloneMessages(b *testing.B) {
	var msgs []runtime.Message
	for i := range 200 {
		msgs = append(msgs, benchTurn(i)...)
	}
	b.ReportAllocs()
	for b.Loop() {
		if got := cloneMessages(msgs); len(got) != len(msgs) {
			b.Fatal("short copy")
		}
	}
}
