package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHarnessWritesReport runs the whole harness with a few requests per
// phase and checks that it reports every scenario in well-formed tables.
// It asserts nothing about the figures: timing is the harness's business,
// not a unit test's.
func TestHarnessWritesReport(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the gateway and runs it: not in -short")
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	o := defaults(true)
	o.root, o.out = root, filepath.Join(t.TempDir(), "BENCHMARKS.md")
	o.n1, o.n32, o.n64, o.s1, o.s32, o.s64 = 20, 64, 64, 4, 32, 64
	o.warmup, o.shortSessions, o.longTurns, o.idleSessions = 16, 8, 4, 100
	o.redis = "127.0.0.1:6379"
	wantRedis := redisUp(o.redis)
	if !wantRedis {
		if os.Getenv("CI") == "true" {
			t.Fatal("Redis is not reachable at 127.0.0.1:6379")
		}
		o.redis = ""
	}
	var stdout bytes.Buffer
	if err := run(t.Context(), o, &stdout, io.Discard); err != nil {
		t.Fatalf("run: %v", err)
	}
	file, err := os.ReadFile(o.out)
	if err != nil {
		t.Fatalf("report file: %v", err)
	}
	if !bytes.Equal(file, stdout.Bytes()) {
		t.Error("the report file differs from what was printed")
	}
	report := string(file)
	want := []string{
		"| direct to upstream (absolute) |", "| httputil.ReverseProxy |", "| gateway, stateless |",
		"| gateway, memory session |", "| gateway handoff run |",
		"| direct stream (absolute) |", "| httputil.ReverseProxy stream |", "| gateway stream |",
		"| memory | turn 2 |", "| memory | turn 200+ |",
		"| CPU per plain request, c=32 |", "| gateway RSS at c=64 |",
	}
	if wantRedis {
		want = append(want, "| gateway, Redis session |", "| Redis | turn 200+ |")
	}
	for _, w := range want {
		if !strings.Contains(report, w) {
			t.Errorf("report lacks %q", w)
		}
	}
	// Every table row has as many cells as its header.
	var cols int
	for _, line := range strings.Split(report, "\n") {
		if !strings.HasPrefix(line, "|") {
			cols = 0
			continue
		}
		n := strings.Count(line, "|")
		if cols == 0 {
			cols = n
		} else if n != cols {
			t.Errorf("row has %d cells, its table %d: %s", n-1, cols-1, line)
		}
		if strings.Contains(line, "NaN") || strings.Contains(line, "Inf") {
			t.Errorf("row holds a non-number: %s", line)
		}
	}
}

// TestKeptNotes checks that a run keeps the hand-written end of the report
// it replaces, and only that.
func TestKeptNotes(t *testing.T) {
	dir := t.TempDir()
	with := filepath.Join(dir, "with.md")
	notes := notesMark + "\n\n## Round 9 notes\n\nBy hand.\n"
	if err := os.WriteFile(with, []byte("# Benchmarks\n\n| old | table |\n\n"+notes), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := keptNotes(with); got != "\n"+notes {
		t.Errorf("keptNotes = %q, want %q", got, "\n"+notes)
	}
	without := filepath.Join(dir, "without.md")
	if err := os.WriteFile(without, []byte("# Benchmarks\n\n## Round 9 notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{without, filepath.Join(dir, "absent.md")} {
		if got := keptNotes(path); got != "" {
			t.Errorf("keptNotes(%s) = %q, want nothing", filepath.Base(path), got)
		}
	}
}
