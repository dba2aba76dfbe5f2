// Command bench measures what the gateway adds to a request. It builds the
// gateway (./cmd/switchboard) and a plain httputil.ReverseProxy
// (./bench/revproxy), runs each as its own process so that their CPU time
// and memory are their own, and drives them and a fast fake upstream (in
// this process, with the load generator) over loopback. It prints a
// Markdown report and writes it to BENCHMARKS.md.
//
//	go run ./bench [-quick] [-out BENCHMARKS.md]
//
// With -streams it runs the long-streams benchmark instead (streams.go):
// thousands of slow streams held open at once through the gateway and the
// proxy, and writes its own section of the report.
//
//	go run ./bench -streams [-n 1000,5000,max] [-variants proxy,gateway,...] [-rounds 1] [-redis-pool N] [-profile DIR] [-gaps DIR]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// options says how much to measure and where the report goes.
type options struct {
	quick  bool
	out    string // "" writes no file
	root   string // the module's root
	redis  string // Redis address for the Redis store; "" skips it
	rounds int
	// Requests per phase at concurrency 1, 32 and 64, for plain and
	// streamed requests.
	n1, n32, n64  int
	s1, s32, s64  int
	warmup        int
	longSessions  int // sessions of the turn-200 measurement
	longTurns     int // measured turns of each, from turn 200
	shortSessions int // sessions of the turn-2 measurement
	idleSessions  int // sessions of the memory-per-session measurement
}

func defaults(quick bool) options {
	if quick {
		return options{quick: true, rounds: 1, n1: 200, n32: 1000, n64: 500, s1: 30, s32: 160, s64: 128,
			warmup: 100, longSessions: 2, longTurns: 30, shortSessions: 60, idleSessions: 2000}
	}
	return options{rounds: 3, n1: 1500, n32: 8000, n64: 4000, s1: 150, s32: 960, s64: 640,
		warmup: 300, longSessions: 32, longTurns: 50, shortSessions: 1600, idleSessions: 4000}
}

func main() {
	quick := flag.Bool("quick", false, "a short run (about 30 s), for a smoke test")
	out := flag.String("out", "BENCHMARKS.md", "report file; empty: print only")
	redis := flag.String("redis", "127.0.0.1:6379", "Redis address for the Redis session rows; empty: skip them")
	streams := flag.Bool("streams", false, "run the long-streams benchmark instead")
	counts := flag.String("n", "1000,5000,max", "-streams: stream counts (max: what the open-file limit allows)")
	variants := flag.String("variants", strings.Join(streamVariants, ","), "-streams: targets, in order")
	rounds := flag.Int("rounds", 1, "-streams: rounds (the median is reported)")
	profile := flag.String("profile", "", "-streams: save pprof profiles of every row into this directory (a gateway built with pprof)")
	gaps := flag.String("gaps", "", "-streams: save every gap of every row, with when it ended, into this directory")
	gap := flag.Duration("gap", 200*time.Millisecond, "-streams: time between two chunks of a stream")
	chunks := flag.Int("chunks", 25, "-streams: content chunks per stream")
	ramp := flag.Duration("ramp", 2*time.Second, "-streams: every stream is opened within this time")
	redisPool := flag.Int("redis-pool", 0, "-streams: the Redis store's pool_size in gateway-redis; 0: the store's default (100 per CPU)")
	flag.Parse()
	if *streams {
		o := streamOptions{redis: *redis, out: *out, rounds: max(*rounds, 1), ramp: *ramp, gap: *gap, chunks: max(*chunks, 2), maxStreams: maxStreams(), redisPool: *redisPool}
		os.Exit(mainStreams(o, *counts, *variants, *profile, *gaps))
	}
	o := defaults(*quick)
	o.out, o.redis = *out, *redis
	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	o.root = root
	if o.out != "" && !filepath.IsAbs(o.out) {
		o.out = filepath.Join(root, o.out)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, o, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// mainStreams runs the long-streams benchmark.
func mainStreams(o streamOptions, counts, variants, profile, gaps string) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	root, err := moduleRoot()
	if err != nil {
		return fail(err)
	}
	o.root = root
	if o.ns, err = parseStreamCounts(counts, o.maxStreams); err != nil {
		return fail(err)
	}
	for _, v := range strings.Split(variants, ",") {
		if !slices.Contains(streamVariants, v) {
			return fail(fmt.Errorf("unknown variant %q (want some of %s)", v, strings.Join(streamVariants, ",")))
		}
		o.variants = append(o.variants, v)
	}
	if o.out != "" && !filepath.IsAbs(o.out) {
		o.out = filepath.Join(root, o.out)
	}
	if o.profile, err = outDir(profile); err != nil {
		return fail(err)
	}
	if o.timeline, err = outDir(gaps); err != nil {
		return fail(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := runStreams(ctx, o, os.Stdout, os.Stderr); err != nil {
		return fail(err)
	}
	return 0
}

// moduleRoot finds the directory holding go.mod, from the working directory up.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// run measures everything and writes the report to stdout and o.out;
// progress goes to progress.
func run(ctx context.Context, o options, stdout, progress io.Writer) error {
	tmp, err := os.MkdirTemp("", "switchboard-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	fmt.Fprintln(progress, "building the gateway and the reverse proxy...")
	gwBin, rpBin, err := build(ctx, o.root, tmp)
	if err != nil {
		return err
	}
	if o.redis != "" && !redisUp(o.redis) {
		fmt.Fprintf(progress, "Redis at %s does not answer: skipping the Redis rows\n", o.redis)
		o.redis = ""
	}
	b, err := newBench(ctx, o, tmp, gwBin, rpBin, progress)
	if err != nil {
		return err
	}
	defer b.close()
	rep, err := b.measure(ctx)
	if err != nil {
		for _, p := range b.procs() {
			if p.log.Len() > 0 {
				fmt.Fprintf(progress, "--- %s log:\n%s\n", p.name, tail(p.log.String(), 2000))
			}
		}
		return err
	}
	md := rep.markdown()
	if _, err := io.WriteString(stdout, md); err != nil {
		return err
	}
	if o.out != "" {
		md += keptStreams(o.out) + keptNotes(o.out)
		if err := os.WriteFile(o.out, []byte(md), 0o644); err != nil {
			return fmt.Errorf("write report: %w", err)
		}
		fmt.Fprintln(progress, "wrote", o.out)
	}
	return nil
}

// notesMark starts the part of the report written by hand, which a run
// keeps.
const notesMark = "<!-- Notes written by hand: the harness keeps what follows. -->"

// keptNotes returns the hand-written part of the report at path, from
// notesMark on, after a blank line; empty when there is none.
func keptNotes(path string) string {
	old, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	_, notes, ok := strings.Cut(string(old), notesMark)
	if !ok {
		return ""
	}
	return "\n" + notesMark + notes
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// outDir makes dir, a directory for files a run writes, and returns its
// absolute path; "" stays "", none asked for.
func outDir(dir string) (string, error) {
	if dir == "" {
		return "", nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	return abs, os.MkdirAll(abs, 0o755)
}
