package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// What the long-streams benchmark reads of a target and of the machine:
// goroutines, RSS, profiles, listen drops, the load average.

// fetchTo saves what url answers at path.
func fetchTo(url, path string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// goroutines reads go_goroutines from the process's /metrics.
func goroutines(p *proc) (int, error) {
	resp, err := http.Get(p.base + "/metrics")
	if err != nil {
		return 0, fmt.Errorf("scrape %s: %w", p.name, err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			n, err := strconv.ParseFloat(v, 64)
			return int(n), err
		}
	}
	return 0, fmt.Errorf("scrape %s: no go_goroutines", p.name)
}

// startRSSSampler reads p's RSS every 10 ms until the returned function is
// called, which returns the peak.
func startRSSSampler(p *proc) func() int64 {
	done := make(chan struct{})
	var peak int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			if v, err := p.rss(); err == nil {
				peak = max(peak, v)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 { close(done); wg.Wait(); return peak }
}

// listenDrops is the machine's count of connections dropped because a
// listener's accept queue was full (TcpExt ListenDrops in /proc/net/netstat),
// or 0 when it cannot be read. A dropped connection's client sends its SYN
// again a second later, then after two more, and so on: a row with drops
// measured the kernel's retransmission timers as much as its target, on
// the first chunk (and how many streams were open at once) above all.
func listenDrops() int64 {
	b, err := os.ReadFile("/proc/net/netstat")
	if err != nil {
		return 0
	}
	return parseListenDrops(string(b))
}

// parseListenDrops reads TcpExt's ListenDrops from /proc/net/netstat's
// text: pairs of lines, names then values.
func parseListenDrops(netstat string) int64 {
	lines := strings.Split(netstat, "\n")
	for i := 0; i+1 < len(lines); i += 2 {
		names, values := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(names) == 0 || names[0] != "TcpExt:" || len(values) != len(names) {
			continue
		}
		for j, n := range names {
			if n == "ListenDrops" {
				v, _ := strconv.ParseInt(values[j], 10, 64)
				return v
			}
		}
	}
	return 0
}

// loadAvg is the first three fields of /proc/loadavg.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// gcTraceEnv makes a Go target write a line for each collection it ends on
// its standard error, which gcTrace reads: the row's collections and their
// CPU explain much of how its CPU and latency tails move from one run to
// the next (BENCHMARKS rounds 23, 24 and 28).
const gcTraceEnv = "GODEBUG=gctrace=1"

// gcTrace reads the collections a Go process traced in log (gcTraceEnv):
// how many ended there, and the CPU they took, the sum of each line's
// "ms cpu" figures (the stop-the-world phases, and marking by assists,
// by the background workers and on idle processors):
//
//	gc 5 @6.693s 2%: 2.1+380+0.007 ms clock, 4.3+131/205/0.19+0.014 ms cpu, 169->169->139 MB, ...
//
// Other lines are skipped, and so is a collection's line that a log line
// written between two of its pieces split (listenedOn): the count may miss
// such a collection, which a row, where the targets log nothing, makes
// unlikely.
func gcTrace(log string) (n int, cpu time.Duration) {
	for line := range strings.Lines(log) {
		if !strings.HasPrefix(line, "gc ") {
			continue
		}
		_, rest, ok := strings.Cut(line, " ms clock, ")
		if !ok {
			continue
		}
		figures, _, ok := strings.Cut(rest, " ms cpu")
		if !ok {
			continue
		}
		var ms float64
		for _, f := range strings.FieldsFunc(figures, func(r rune) bool { return r == '+' || r == '/' }) {
			v, err := strconv.ParseFloat(f, 64)
			if err != nil {
				ms = -1
				break
			}
			ms += v
		}
		if ms < 0 {
			continue
		}
		n++
		cpu += time.Duration(ms * float64(time.Millisecond))
	}
	return n, cpu
}

// withoutGCTrace is log less its collection lines (gcTrace), for what the
// process itself logged.
func withoutGCTrace(log string) string {
	var b strings.Builder
	for line := range strings.Lines(log) {
		if n, _ := gcTrace(line); n == 0 {
			b.WriteString(line)
		}
	}
	return b.String()
}
