package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The long-streams benchmark (go run ./bench -streams) holds N slow
// streams open at once through one target, a fresh process per phase, and
// reads what each open stream costs it. The fake provider (bench/slowupstream,
// its own process) sends a content chunk every gap for chunks chunks; the
// load generator opens every stream within ramp. Targets:
//
//	proxy            httputil.ReverseProxy (bench/revproxy)
//	gateway          the gateway, stateless streams
//	gateway-redis    the gateway on Redis, every stream its own session
//	gateway-handoff  the gateway's support graph: a handoff, then the answer

// streamOptions says what the long-streams benchmark measures.
type streamOptions struct {
	root  string
	out   string // "" writes no file
	redis string // "" skips gateway-redis
	// redisPool is gateway-redis's pool_size; 0 keeps the store's default.
	redisPool int
	ns        []int
	variants  []string
	rounds    int
	ramp      time.Duration
	gap       time.Duration
	chunks    int
	profile   string // directory for pprof profiles of each phase; "" takes none
	timeline  string // directory for every gap of each row with when it ended; "" keeps none
	// maxStreams is what the open-file limit allows: a stream through a
	// target holds two files in it.
	maxStreams int
}

// streamVariants are the targets, in the order they are measured.
var streamVariants = []string{"proxy", "gateway", "gateway-redis", "gateway-handoff"}

// fdReserve is how many files of the limit are kept for what is not a
// stream: listeners, metrics connections, the runtime's own, and the Redis
// store's pool, which may open 100 connections per CPU (cache's
// defaultPoolSize) while thousands of streams start.
const fdReserve = 600

// maxStreams is the most streams a target can hold under its open-file
// limit (the same as this process's), in hundreds.
func maxStreams() int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur > 1<<20 {
		return 9000
	}
	return int((lim.Cur-fdReserve)/2) / 100 * 100
}

// parseStreamCounts reads "1000,5000,max".
func parseStreamCounts(s string, max int) ([]int, error) {
	var ns []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "max" {
			ns = append(ns, max)
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("bad stream count %q", f)
		}
		if n > max {
			return nil, fmt.Errorf("%d streams: the open-file limit allows %d", n, max)
		}
		ns = append(ns, n)
	}
	return ns, nil
}

// streamsConfig is the gateway's config: graph "plain" (one agent on the
// slow model), "fast" (the same with no gap, for warm-ups) and "support"
// (triage hands off to billing, which answers slowly).
const streamsConfig = `server:
  session_header: X-Session-Id
store:
  url: %s
providers:
  slow:
    base_url: %s/v1
    api_key: bench
agents:
  assistant:
    instructions: You are a helpful assistant.
    model: slow/plain
  warm:
    instructions: You are a helpful assistant.
    model: slow/fast
  triage:
    instructions: You are the triage desk of ACME. Hand off to billing for charges.
    model: slow/triage
    handoffs: [billing]
  billing:
    description: Answers questions about charges
    instructions: You are ACME's billing desk.
    model: slow/billing
graphs:
  plain: {lead: assistant}
  fast: {lead: warm}
  support: {lead: triage}
`

// streamBodyFor is the streamed request body for a graph (or, through the
// proxy, an upstream model) of that name.
func streamBodyFor(model string) []byte {
	return []byte(`{"model":"` + model + `","stream":true,"messages":[{"role":"system","content":"Answer briefly."},{"role":"user","content":"What did you charge me for last month?"}]}`)
}

// streamBench holds what every phase shares.
type streamBench struct {
	o        streamOptions
	progress io.Writer
	tmp      string
	gwBin    string
	rpBin    string
	up       *proc
	prefix   string
}

// runStreams measures every count and variant and writes the report.
func runStreams(ctx context.Context, o streamOptions, stdout, progress io.Writer) error {
	rep, err := measureStreams(ctx, o, progress)
	if err != nil {
		return err
	}
	md := rep.markdown()
	if _, err := io.WriteString(stdout, md); err != nil {
		return err
	}
	if o.out != "" {
		old, _ := os.ReadFile(o.out)
		if err := os.WriteFile(o.out, []byte(spliceStreams(string(old), md)), 0o644); err != nil {
			return fmt.Errorf("write report: %w", err)
		}
		fmt.Fprintln(progress, "wrote", o.out)
	}
	return nil
}

// measureStreams measures every count and variant of o: the report's
// records, the median of the rounds.
func measureStreams(ctx context.Context, o streamOptions, progress io.Writer) (*streamReport, error) {
	tmp, err := os.MkdirTemp("", "switchboard-streams-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	fmt.Fprintln(progress, "building the gateway, the reverse proxy and the slow upstream...")
	gwMain := "./cmd/switchboard"
	if o.profile != "" {
		gwMain = "./bench/gwprof"
	}
	bins, err := buildAll(ctx, o.root, tmp, gwMain, "./bench/revproxy", "./bench/slowupstream")
	if err != nil {
		return nil, err
	}
	if o.redis != "" && !redisUp(o.redis) {
		fmt.Fprintf(progress, "Redis at %s does not answer: skipping gateway-redis\n", o.redis)
		o.redis = ""
	}
	if o.redis == "" {
		o.variants = slices.DeleteFunc(o.variants, func(v string) bool { return v == "gateway-redis" })
	}
	sb := &streamBench{o: o, progress: progress, tmp: tmp, gwBin: bins[0], rpBin: bins[1],
		prefix: "streams-" + strings.ToLower(rand.Text()[:10])}
	sb.up, err = start("slowupstream", bins[2], "-listen", "{addr}", "-gap", o.gap.String(), "-chunks", strconv.Itoa(o.chunks))
	if err != nil {
		return nil, err
	}
	defer sb.up.stop()
	if o.redis != "" {
		defer cleanRedisPrefix(o.redis, sb.prefix)
	}
	rep := &streamReport{o: o, load0: loadAvg(), start: time.Now()}
	recs := map[string][]rec{}
	for round := range o.rounds {
		for _, n := range o.ns {
			for _, v := range o.variants {
				fmt.Fprintf(progress, "round %d/%d: %d streams, %s\n", round+1, o.rounds, n, v)
				r, err := sb.phase(ctx, v, n, round)
				if err != nil {
					return nil, fmt.Errorf("%s, %d streams: %w", v, n, err)
				}
				fmt.Fprintf(progress, "  %s\n", streamSummary(r))
				k := streamKey(v, n)
				recs[k] = append(recs[k], r)
			}
		}
	}
	rep.load1 = loadAvg()
	rep.recs = map[string]rec{}
	for k, rs := range recs {
		rep.recs[k] = median(rs)
	}
	return rep, nil
}

func streamKey(variant string, n int) string { return variant + "/" + strconv.Itoa(n) }

// buildAll compiles each main package into dir, in order.
func buildAll(ctx context.Context, root, dir string, mains ...string) ([]string, error) {
	var out []string
	for _, m := range mains {
		bin := filepath.Join(dir, filepath.Base(m))
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, m)
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go build %s: %w\n%s", m, err, b)
		}
		out = append(out, bin)
	}
	return out, nil
}

// startTarget starts a fresh process for variant and returns it with the
// URL and body its streams use.
func (sb *streamBench) startTarget(variant string) (*proc, error) {
	if variant == "proxy" {
		args := []string{"-listen", "{addr}", "-upstream", strings.TrimSuffix(sb.up.base, "/")}
		if sb.o.profile != "" {
			args = append(args, "-pprof")
		}
		return startEnv("revproxy", sb.rpBin, []string{gcTraceEnv}, args...)
	}
	store := "memory://"
	if variant == "gateway-redis" {
		store = "redis://" + sb.o.redis + "/0"
		if sb.o.redisPool > 0 {
			store += "?pool_size=" + strconv.Itoa(sb.o.redisPool)
		}
	}
	path := filepath.Join(sb.tmp, variant+".yaml")
	if err := os.WriteFile(path, []byte(fmt.Sprintf(streamsConfig, store, sb.up.base)), 0o600); err != nil {
		return nil, err
	}
	return startEnv(variant, sb.gwBin, []string{gcTraceEnv}, "serve", "--config", path, "--listen", "{addr}")
}

// phase measures n streams through a fresh process of variant.
func (sb *streamBench) phase(ctx context.Context, variant string, n, round int) (rec, error) {
	p, err := sb.startTarget(variant)
	if err != nil {
		return nil, err
	}
	defer p.stop()
	// Every stream on a connection of its own, as from a client each: a
	// connection reused from an ended stream may be closed under it.
	client := &http.Client{Transport: &http.Transport{DisableCompression: true, DisableKeepAlives: true}}
	defer client.CloseIdleConnections()
	url := p.base + "/v1/chat/completions"

	// Warm up on the fast model, then empty the pools on both sides so
	// that the baseline holds no connection.
	warm := streamBodyFor("fast")
	var wg sync.WaitGroup
	var warmErr error
	var mu sync.Mutex
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 4 {
				if _, err := openStream(ctx, client, url, warm, nil, sb.o.chunks, nil, false); err != nil {
					mu.Lock()
					warmErr = err
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	if warmErr != nil {
		return nil, fmt.Errorf("warm-up: %w", warmErr)
	}
	gor0, _, err := sb.settledGoroutines(p, client, 0)
	if err != nil {
		return nil, err
	}
	mem0, err := p.metrics()
	if err != nil {
		return nil, err
	}
	rss0, err := p.rss()
	if err != nil {
		return nil, err
	}
	cpu0, err := p.cpu()
	if err != nil {
		return nil, err
	}
	sys0, err := p.syscalls()
	if err != nil {
		return nil, err
	}
	log0 := p.log.Len()

	drops0 := listenDrops()
	sampler := startRSSSampler(p)
	var side sync.WaitGroup
	if sb.o.profile != "" {
		// A CPU profile of the whole row, from its first stream.
		secs := int((sb.o.ramp + sb.o.gap*time.Duration(sb.o.chunks)).Seconds())
		side.Add(1)
		go func() {
			defer side.Done()
			path := filepath.Join(sb.o.profile, fmt.Sprintf("%s-%d-r%d.cpu.pb.gz", variant, n, round))
			if err := fetchTo(p.base+"/debug/pprof/profile?seconds="+strconv.Itoa(secs), path); err != nil {
				fmt.Fprintf(sb.progress, "  profile cpu: %v\n", err)
			}
		}()
	}
	var peakGor, inflightAtPeak int
	var mem1 map[string]float64
	var open gauge
	side.Add(1)
	go func() {
		// Every stream is open from the end of the ramp until the first
		// ones end.
		defer side.Done()
		// Once every stream is open, or when the first ones are about to
		// end if under load they are not.
		deadline := time.Now().Add(sb.o.ramp + sb.o.gap*time.Duration(sb.o.chunks)*3/4)
		time.Sleep(sb.o.ramp)
		for open.now.Load() < int64(n) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		// What the target holds per stream is over the streams in
		// flight: under load some may wait for their first chunk yet,
		// and their goroutines and stacks are held all the same.
		inflightAtPeak = int(open.inflight.Load())
		peakGor, _ = goroutines(p)
		mem1, _ = p.metrics()
		if sb.o.profile != "" {
			sb.profiles(p, variant, n, round)
		}
	}()
	body, header := streamBodyFor("plain"), func(int) map[string]string { return nil }
	switch variant {
	case "gateway-handoff":
		body = streamBodyFor("support")
	case "gateway-redis":
		header = func(i int) map[string]string {
			return map[string]string{"X-Session-Id": sb.prefix + "-" + strconv.Itoa(round) + "-" + strconv.Itoa(n) + "-" + strconv.Itoa(i)}
		}
	}
	res := holdStreams(ctx, client, url, body, header, n, sb.o.ramp, sb.o.chunks, &open, sb.o.timeline != "")
	if sb.o.timeline != "" {
		path := filepath.Join(sb.o.timeline, fmt.Sprintf("%s-%d-r%d.gaps.tsv", variant, n, round))
		if err := writeTimeline(path, res.timeline); err != nil {
			fmt.Fprintf(sb.progress, "  gaps: %v\n", err)
		}
		fmt.Fprintf(sb.progress, "  gaps over %v, by when they ended: %s\n", 2*sb.o.gap, lateGaps(res.timeline, 2*sb.o.gap, 500*time.Millisecond))
	}
	cpu1, err := p.cpu()
	if err != nil {
		return nil, err
	}
	sys1, err := p.syscalls()
	if err != nil {
		return nil, err
	}
	gcs, gcCPU := gcTrace(p.log.String()[log0:])
	peak := sampler()
	side.Wait()
	drops := listenDrops() - drops0

	gorAfter, settle, err := sb.settledGoroutines(p, client, gor0)
	if err != nil {
		return nil, err
	}
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	sampled := float64(max(inflightAtPeak, 1))
	out := rec{
		"dropped":      float64(res.dropped),
		"rss_peak_mb":  float64(peak) / (1 << 20),
		"rss_kb":       float64(peak-rss0) / 1024 / float64(n),
		"cpu_ms":       ms(cpu1-cpu0) / float64(n),
		"gcs":          float64(gcs),
		"gc_cpu_ms":    ms(gcCPU),
		"syscalls":     float64(sys1-sys0) / float64(n),
		"gap50":        ms(pct(res.gaps, 50)),
		"gap99":        ms(pct(res.gaps, 99)),
		"first50":      ms(pct(res.firsts, 50)),
		"first99":      ms(pct(res.firsts, 99)),
		"gor_base":     float64(gor0),
		"gor_per":      float64(peakGor-gor0) / sampled,
		"open_max":     float64(open.max.Load()),
		"gor_after":    float64(gorAfter),
		"settle_ms":    ms(settle),
		"listen_drops": float64(drops),
	}
	// The heap and the stacks in use per stream in flight when they were
	// read, for the profile notes (the table shows RSS).
	for k, name := range map[string]string{"heap_kb": "go_memstats_heap_inuse_bytes", "stack_kb": "go_memstats_stack_inuse_bytes",
		"alloc_kb": "go_memstats_heap_alloc_bytes", "nextgc_kb": "go_memstats_next_gc_bytes", "sys_kb": "go_memstats_sys_bytes"} {
		out[k] = (mem1[name] - mem0[name]) / 1024 / sampled
	}
	if res.dropped > 0 {
		fmt.Fprintf(sb.progress, "  %d dropped, e.g.: %s\n", res.dropped, strings.Join(res.errs, "; "))
	}
	if logged := withoutGCTrace(p.log.String()); logged != "" {
		fmt.Fprintf(sb.progress, "  %s logged %d lines; the last: %s\n", p.name, strings.Count(logged, "\n"), tail(logged, 600))
	}
	return out, nil
}

// closeIdle closes the idle connections of the load generator (its
// streams', and the scrapes' and profile fetches' of http.DefaultClient)
// and, with upstream, of the upstream, so that the target's pools empty.
func (sb *streamBench) closeIdle(client *http.Client, upstream bool) error {
	client.CloseIdleConnections()
	http.DefaultClient.CloseIdleConnections()
	if !upstream {
		return nil
	}
	resp, err := http.Post(sb.up.base+"/close-idle", "text/plain", nil)
	if err != nil {
		return fmt.Errorf("close idle upstream connections: %w", err)
	}
	resp.Body.Close()
	return nil
}

// profiles saves the target's heap and goroutine profiles (both processes
// serve net/http/pprof when profiling).
func (sb *streamBench) profiles(p *proc, variant string, n, round int) {
	for _, pr := range []struct{ name, query string }{
		{"heap", "heap?gc=1"}, {"goroutine", "goroutine"}, {"allocs", "allocs"},
	} {
		path := filepath.Join(sb.o.profile, fmt.Sprintf("%s-%d-r%d.%s.pb.gz", variant, n, round, pr.name))
		if err := fetchTo(p.base+"/debug/pprof/"+pr.query, path); err != nil {
			fmt.Fprintf(sb.progress, "  profile %s: %v\n", pr.name, err)
		}
	}
}

// settledGoroutines waits until p's goroutines are down to floor (10 s at
// most) or, with floor 0, have not moved for a second, closing the idle
// connections of the load generator again every second (a connection may
// turn idle after the last close). With floor 0 (the base, before a row)
// it closes the upstream's too, so that the row starts from empty pools;
// after a row, the connections the target holds to the upstream are its
// own to close: a gateway that nobody calls again must go back to its
// base by itself (issue 22), with no provider closing them for it. It
// returns their number and the wait.
func (sb *streamBench) settledGoroutines(p *proc, client *http.Client, floor int) (int, time.Duration, error) {
	t0 := time.Now()
	last, still := -1, 0
	for i := 0; ; i++ {
		if i%10 == 0 {
			if err := sb.closeIdle(client, floor == 0); err != nil {
				return 0, 0, err
			}
		}
		g, err := goroutines(p)
		if err != nil {
			return 0, 0, err
		}
		if g == last {
			still++
		} else {
			still = 0
		}
		last = g
		if g <= floor || (floor == 0 && still == 10) || time.Since(t0) > 10*time.Second {
			return g, time.Since(t0), nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}
