package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// bench holds the processes under test and the client that loads them.
type bench struct {
	o        options
	progress io.Writer
	client   *http.Client
	up       *upstream
	rp       *proc
	gw       *proc // memory store
	gwRedis  *proc // Redis store; nil when Redis is skipped
	prefix   string
	scrape   map[*proc]float64 // allocations made by one /metrics scrape
}

func newBench(ctx context.Context, o options, tmp, gwBin, rpBin string, progress io.Writer) (*bench, error) {
	b := &bench{o: o, progress: progress, client: newClient(), prefix: "bench-" + strings.ToLower(rand.Text()[:10]),
		scrape: map[*proc]float64{}}
	var err error
	if b.up, err = startUpstream(time.Millisecond); err != nil {
		return nil, err
	}
	if b.rp, err = start("revproxy", rpBin, "-listen", "{addr}", "-upstream", "http://"+b.up.ln.Addr().String()); err != nil {
		b.close()
		return nil, err
	}
	memCfg, err := writeConfig(tmp, "memory", "memory://", b.up)
	if err != nil {
		b.close()
		return nil, err
	}
	if b.gw, err = start("gateway", gwBin, "serve", "--config", memCfg, "--listen", "{addr}"); err != nil {
		b.close()
		return nil, err
	}
	if o.redis != "" {
		redisCfg, err := writeConfig(tmp, "redis", "redis://"+o.redis+"/0", b.up)
		if err != nil {
			b.close()
			return nil, err
		}
		if b.gwRedis, err = start("gateway-redis", gwBin, "serve", "--config", redisCfg, "--listen", "{addr}"); err != nil {
			b.close()
			return nil, err
		}
	}
	for _, p := range b.procs() {
		if b.scrape[p], err = scrapeCost(p); err != nil {
			b.close()
			return nil, err
		}
	}
	return b, nil
}

func (b *bench) procs() []*proc {
	ps := []*proc{b.rp, b.gw}
	if b.gwRedis != nil {
		ps = append(ps, b.gwRedis)
	}
	return ps
}

func (b *bench) close() {
	for _, p := range []*proc{b.rp, b.gw, b.gwRedis} {
		if p != nil {
			p.stop()
		}
	}
	if b.up != nil {
		b.up.close()
	}
	if b.o.redis != "" {
		b.cleanRedis()
	}
}

// cleanRedis deletes the sessions this run made.
func (b *bench) cleanRedis() { cleanRedisPrefix(b.o.redis, b.prefix) }

// cleanRedisPrefix deletes the session keys whose id holds prefix.
func cleanRedisPrefix(addr, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	iter := c.Scan(ctx, 0, "sb:*"+prefix+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
		if len(keys) == 1000 {
			c.Del(ctx, keys...)
			keys = keys[:0]
		}
	}
	if len(keys) > 0 {
		c.Del(ctx, keys...)
	}
}

// redisUp reports whether Redis answers at addr.
func redisUp(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// row is one line of the report: a job sent to one target.
type row struct {
	name   string
	base   string // the row whose latency this one's is compared with
	p      *proc  // nil: the upstream itself
	job    job
	stream bool
}

// rec is one row's measurements in one round.
type rec map[string]float64

// snapshot is what a phase reads of a process before and after.
type snapshot struct {
	cpu     time.Duration
	metrics map[string]float64
}

func take(p *proc) (snapshot, error) {
	if p == nil {
		return snapshot{}, nil
	}
	m, err := p.metrics()
	if err != nil {
		return snapshot{}, err
	}
	cpu, err := p.cpu()
	return snapshot{cpu: cpu, metrics: m}, err
}

// scrapeCost is how many allocations one /metrics scrape makes in p.
func scrapeCost(p *proc) (float64, error) {
	var last float64
	var costs []float64
	for i := range 4 {
		m, err := p.metrics()
		if err != nil {
			return 0, err
		}
		v := m[mallocs]
		if i > 0 {
			costs = append(costs, v-last)
		}
		last = v
	}
	slices.Sort(costs)
	return costs[len(costs)/2], nil
}

const mallocs = "go_memstats_mallocs_total"

// phase runs n requests at concurrency conc and records, under the given
// suffix, latency percentiles, throughput, the target's CPU time and
// allocations per request and, when rss is set, its peak RSS.
func (b *bench) phase(ctx context.Context, r row, conc, n int, suffix string, rss bool, out rec) error {
	before, err := take(r.p)
	if err != nil {
		return err
	}
	var peak int64
	stopRSS := func() {}
	if rss && r.p != nil {
		sampler := startRSSSampler(r.p)
		stopRSS = func() { peak = sampler() }
	}
	st, err := load(ctx, conc, n, r.job)
	stopRSS()
	if err != nil {
		return fmt.Errorf("%s at c=%d: %w", r.name, conc, err)
	}
	after, err := take(r.p)
	if err != nil {
		return err
	}
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	out["p50"+suffix], out["p99"+suffix] = ms(pct(st.lat, 50)), ms(pct(st.lat, 99))
	out["rps"+suffix] = st.rps()
	if r.stream {
		out["ttft50"+suffix], out["ttft99"+suffix] = ms(pct(st.ttft, 50)), ms(pct(st.ttft, 99))
		out["gap50"+suffix], out["gap99"+suffix] = ms(pct(st.gap, 50)), ms(pct(st.gap, 99))
	}
	if r.p != nil {
		out["cpu"+suffix] = float64(after.cpu-before.cpu) / float64(time.Microsecond) / float64(n)
		out["allocs"+suffix] = (after.metrics[mallocs] - before.metrics[mallocs] - b.scrape[r.p]) / float64(n)
		if rss {
			out["rss"+suffix] = float64(peak) / (1 << 20)
		}
	}
	return nil
}

// measureRow measures one row in one round: a warm-up, then concurrency
// 1, 32 and 64.
func (b *bench) measureRow(ctx context.Context, r row) (rec, error) {
	n1, n32, n64, warm := b.o.n1, b.o.n32, b.o.n64, b.o.warmup
	if r.stream {
		n1, n32, n64, warm = b.o.s1, b.o.s32, b.o.s64, b.o.s32/4
	}
	if _, err := load(ctx, 8, warm, r.job); err != nil {
		return nil, fmt.Errorf("%s warm-up: %w", r.name, err)
	}
	out := rec{}
	for _, ph := range []struct {
		conc, n int
		suffix  string
	}{{1, n1, "_1"}, {32, n32, "_32"}, {64, n64, "_64"}} {
		if err := b.phase(ctx, r, ph.conc, ph.n, ph.suffix, ph.conc == 64, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// rows lists what is measured, baselines first.
func (b *bench) rows() []row {
	chat := "/v1/chat/completions"
	c := b.client
	rows := []row{
		{name: "direct to upstream", p: nil, job: plainJob(c, b.up.url()+"/chat/completions", plainBody)},
		{name: "httputil.ReverseProxy", base: "direct to upstream", p: b.rp, job: plainJob(c, b.rp.base+chat, plainBody)},
		{name: "gateway, stateless", base: "direct to upstream", p: b.gw, job: plainJob(c, b.gw.base+chat, plainBody)},
		{name: "gateway, memory session", base: "direct to upstream", p: b.gw, job: sessionJob(c, b.gw.base+chat, b.prefix+"-mem")},
	}
	if b.gwRedis != nil {
		rows = append(rows, row{name: "gateway, Redis session", base: "direct to upstream", p: b.gwRedis, job: sessionJob(c, b.gwRedis.base+chat, b.prefix+"-redis")})
	}
	return append(rows,
		row{name: "direct handoff run (3 model calls + tool)", job: directHandoffJob(c, b.up)},
		row{name: "gateway handoff run", base: "direct handoff run (3 model calls + tool)", p: b.gw, job: plainJob(c, b.gw.base+chat, handoffBody)},
		row{name: "direct stream", stream: true, job: streamJob(c, b.up.url()+"/chat/completions", streamBody)},
		row{name: "httputil.ReverseProxy stream", base: "direct stream", stream: true, p: b.rp, job: streamJob(c, b.rp.base+chat, streamBody)},
		row{name: "gateway stream", base: "direct stream", stream: true, p: b.gw, job: streamJob(c, b.gw.base+chat, streamBody)},
	)
}

// measure runs every row for the configured rounds (rows interleaved, so
// that drift of the machine hits them alike) and keeps each figure's
// median over the rounds; then the session-length and idle-session
// measurements.
func (b *bench) measure(ctx context.Context) (*report, error) {
	rows := b.rows()
	recs := make([][]rec, len(rows))
	for round := range b.o.rounds {
		for i, r := range rows {
			fmt.Fprintf(b.progress, "round %d/%d: %s\n", round+1, b.o.rounds, r.name)
			m, err := b.measureRow(ctx, r)
			if err != nil {
				return nil, err
			}
			recs[i] = append(recs[i], m)
		}
	}
	rep := &report{o: b.o, redisSkipped: b.gwRedis == nil}
	for i, r := range rows {
		rep.rows = append(rep.rows, result{row: r, m: median(recs[i])})
	}
	for _, g := range []struct {
		name string
		p    *proc
	}{{"memory", b.gw}, {"Redis", b.gwRedis}} {
		if g.p == nil {
			continue
		}
		fmt.Fprintf(b.progress, "session length, %s store\n", g.name)
		sl, err := b.sessionLength(ctx, g.name, g.p)
		if err != nil {
			return nil, err
		}
		rep.lengths = append(rep.lengths, sl...)
	}
	fmt.Fprintf(b.progress, "session length, through the reverse proxy\n")
	pl, err := b.proxyLength(ctx)
	if err != nil {
		return nil, err
	}
	rep.proxyLengths = pl
	per, err := idleSessionBytes(ctx, b.o.idleSessions)
	if err != nil {
		return nil, err
	}
	rep.idleBytes = per
	return rep, nil
}

// median keeps each figure's median over the rounds.
func median(rs []rec) rec {
	out := rec{}
	for k := range rs[0] {
		vs := make([]float64, 0, len(rs))
		for _, r := range rs {
			vs = append(vs, r[k])
		}
		slices.Sort(vs)
		out[k] = vs[len(vs)/2]
	}
	return out
}

// lengthResult is the cost of one turn of a session at some length.
type lengthResult struct {
	store    string
	turn     string
	n        int
	p50      float64 // ms, the whole request
	overhead float64 // µs, mean gateway time excluding the provider
	cpu      float64 // µs of gateway CPU per request, the provider call's encoding included
}

// lengthBlocks is how many blocks of each kind the session-length
// measurement alternates.
const lengthBlocks = 10

// sessionLength measures turn 2 of fresh sessions and turns 200 onwards of
// long ones, one request at a time. It alternates blocks of the two, so
// that a drift in the machine's load falls on both alike, and sends them
// to two graphs of the same agent ("plain" and "plain_long"), so that the
// gateway's overhead histogram tells them apart.
func (b *bench) sessionLength(ctx context.Context, store string, p *proc) ([]lengthResult, error) {
	url := p.base + "/v1/chat/completions"
	id := func(kind string, s int) string {
		return b.prefix + "-len-" + store + "-" + kind + "-" + strconv.Itoa(s)
	}
	turn := func(ctx context.Context, graph, sess string, t int) (sample, error) {
		body := []byte(`{"model":"` + graph + `","messages":[{"role":"user","content":"Turn ` + strconv.Itoa(t) + `: hello there, what can you do for me today?"}]}`)
		return post(ctx, b.client, url, body, map[string]string{"X-Session-Id": strings.ToLower(sess)})
	}
	// Set up: turn 1 of the short sessions, turns 1-199 of the long ones.
	short, long := b.o.shortSessions, b.o.longSessions
	if _, err := load(ctx, 8, short, func(ctx context.Context, _, i int) (sample, error) {
		return turn(ctx, "plain", id("short", i), 1)
	}); err != nil {
		return nil, fmt.Errorf("session setup: %w", err)
	}
	var wg sync.WaitGroup
	errs := make([]error, long)
	for s := range long {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := 1; t < 200 && errs[s] == nil; t++ {
				_, errs[s] = turn(ctx, "plain_long", id("long", s), t)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("session setup: %w", err)
		}
	}
	kinds := []struct {
		name, graph string
		n           int
		job         job
		lat         []time.Duration
		cpu         time.Duration
	}{
		{name: "turn 2", graph: "plain", n: short, job: func(ctx context.Context, _, i int) (sample, error) {
			return turn(ctx, "plain", id("short", i), 2)
		}},
		{name: "turn 200+", graph: "plain_long", n: long * b.o.longTurns, job: func(ctx context.Context, _, i int) (sample, error) {
			return turn(ctx, "plain_long", id("long", i%long), 200+i/long)
		}},
	}
	before, err := take(p)
	if err != nil {
		return nil, err
	}
	for blk := range lengthBlocks {
		for k := range kinds {
			kd := &kinds[k]
			lo, hi := kd.n*blk/lengthBlocks, kd.n*(blk+1)/lengthBlocks
			c0, err := p.cpu()
			if err != nil {
				return nil, err
			}
			st, err := load(ctx, 1, hi-lo, func(ctx context.Context, w, i int) (sample, error) { return kd.job(ctx, w, lo+i) })
			if err != nil {
				return nil, fmt.Errorf("session %s: %w", kd.name, err)
			}
			c1, err := p.cpu()
			if err != nil {
				return nil, err
			}
			kd.lat, kd.cpu = append(kd.lat, st.lat...), kd.cpu+c1-c0
		}
	}
	after, err := take(p)
	if err != nil {
		return nil, err
	}
	var out []lengthResult
	for _, kd := range kinds {
		sum := `switchboard_overhead_seconds_sum{graph="` + kd.graph + `"}`
		count := `switchboard_overhead_seconds_count{graph="` + kd.graph + `"}`
		dn := after.metrics[count] - before.metrics[count]
		if dn != float64(kd.n) {
			return nil, fmt.Errorf("session %s: the gateway counted %v requests, want %d", kd.name, dn, kd.n)
		}
		slices.Sort(kd.lat)
		out = append(out, lengthResult{
			store: store, turn: kd.name, n: kd.n,
			p50:      float64(pct(kd.lat, 50)) / 1e6,
			overhead: (after.metrics[sum] - before.metrics[sum]) / dn * 1e6,
			cpu:      float64(kd.cpu) / float64(time.Microsecond) / float64(kd.n),
		})
	}
	return out, nil
}

// historyBody is the request a client without sessions sends at turn t: the
// whole conversation so far (each earlier turn's question and the fake
// upstream's answer), then the new question. It is what the gateway sends
// upstream at turn t of a session, bar the agent's instructions.
func historyBody(t int) []byte {
	var b strings.Builder
	b.WriteString(`{"model":"plain","messages":[`)
	for k := 1; k <= t; k++ {
		if k > 1 {
			b.WriteString(`{"role":"assistant","content":"Hello! How can I help you today?"},`)
		}
		b.WriteString(`{"role":"user","content":"Turn ` + strconv.Itoa(k) + `: hello there, what can you do for me today?"}`)
		if k < t {
			b.WriteByte(',')
		}
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// proxyLength measures turn 2 and turn 200 of a stateless client through
// the reverse proxy, one request at a time, as many requests as the
// session-length rows make: the same upstream bodies the gateway builds at
// those turns, so that the proxy's growth with the body is the baseline of
// the gateway's. Overhead is not measured (the proxy has no histogram).
func (b *bench) proxyLength(ctx context.Context) ([]lengthResult, error) {
	url := b.rp.base + "/v1/chat/completions"
	var out []lengthResult
	for _, m := range []struct {
		name string
		n    int
		body []byte
	}{
		{"turn 2", b.o.shortSessions, historyBody(2)},
		{"turn 200+", b.o.longSessions * b.o.longTurns, historyBody(200)},
	} {
		job := plainJob(b.client, url, m.body)
		if _, err := load(ctx, 1, m.n/4, job); err != nil { // warm-up
			return nil, fmt.Errorf("proxy %s: %w", m.name, err)
		}
		before, err := take(b.rp)
		if err != nil {
			return nil, err
		}
		st, err := load(ctx, 1, m.n, job)
		if err != nil {
			return nil, fmt.Errorf("proxy %s: %w", m.name, err)
		}
		after, err := take(b.rp)
		if err != nil {
			return nil, err
		}
		out = append(out, lengthResult{
			store: "ReverseProxy (stateless client, whole history)", turn: m.name, n: m.n,
			p50:      float64(pct(st.lat, 50)) / 1e6,
			overhead: -1,
			cpu:      float64(after.cpu-before.cpu) / float64(time.Microsecond) / float64(m.n),
		})
	}
	return out, nil
}
