// Package redisscale runs the session store under load against a real
// Redis Cluster or Sentinel setup and kills a master in the middle, then
// checks that no acknowledged step was lost. scripts/redis-scale.sh starts
// the Redis processes on private ports and runs it; without
// SWITCHBOARD_SCALE_URL the test is skipped.
package redisscale

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/switchboard-ai/switchboard/cache"
	"github.com/switchboard-ai/switchboard/runtime"
)

// config is what the script passes.
type config struct {
	url          string        // the store URL (redis-cluster:// or redis-sentinel://)
	seeds        []string      // cluster: node addresses; sentinel: sentinel addresses
	master       string        // sentinel: the master's name
	duration     time.Duration // load time
	killAfter    time.Duration // when the master is killed
	workers      int           // concurrent sessions
	waitReplicas int
}

func readConfig(t *testing.T) config {
	u := os.Getenv("SWITCHBOARD_SCALE_URL")
	if u == "" {
		t.Skip("SWITCHBOARD_SCALE_URL is not set: scripts/redis-scale.sh runs this test")
	}
	num := func(name string, def int) int {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return n
		}
		return def
	}
	c := config{
		url:          u,
		seeds:        strings.Split(os.Getenv("SWITCHBOARD_SCALE_SEEDS"), ","),
		master:       os.Getenv("SWITCHBOARD_SCALE_MASTER"),
		duration:     time.Duration(num("SWITCHBOARD_SCALE_SECONDS", 6)) * time.Second,
		workers:      num("SWITCHBOARD_SCALE_WORKERS", 16),
		waitReplicas: num("SWITCHBOARD_SCALE_WAIT_REPLICAS", 1),
	}
	c.killAfter = c.duration / 4
	return c
}

// worker is one session's client: it appends one message per turn and
// remembers which turns were acknowledged.
type worker struct {
	key   runtime.SessionKey
	acked []string // messages whose save returned success, in order
	// firstAfter is when a save of this session first succeeded after the
	// kill.
	firstAfter time.Time
	attempts   int
	failures   int
	lastErr    error
}

// The test's outcome, for the script's report.
type result struct {
	acked, failed   int
	before, after   float64 // acknowledged turns per second before the kill and after recovery
	outage          time.Duration
	lost, unordered int
}

func TestFailoverUnderLoad(t *testing.T) {
	cfg := readConfig(t)
	ctx := context.Background()
	store, err := cache.Open(ctx, cache.Options{
		URL: cfg.url, Timeout: time.Second, LockLease: 2 * time.Second, WaitReplicas: cfg.waitReplicas,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	prefix := "scale-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	workers := make([]*worker, cfg.workers)
	for i := range workers {
		workers[i] = &worker{key: runtime.SessionKey{Principal: "scale", ID: fmt.Sprintf("%s-%d", prefix, i)}}
	}

	var (
		mu          sync.Mutex
		successes   []time.Time // when each acknowledged save returned
		killedNanos atomic.Int64
	)
	start := time.Now()
	var stop atomic.Bool
	var served atomic.Int64 // sessions served again after the kill
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Go(func() {
			for n := 0; !stop.Load(); n++ {
				msg := fmt.Sprintf("%s turn %d", w.key.ID, n)
				began := time.Now().UnixNano()
				w.attempts++
				if err := turn(ctx, store, w.key, msg); err != nil {
					w.failures++
					w.lastErr = err
					time.Sleep(20 * time.Millisecond)
					continue
				}
				w.acked = append(w.acked, msg)
				// Served again: a turn begun after the kill succeeded.
				if k := killedNanos.Load(); k != 0 && began > k && w.firstAfter.IsZero() {
					w.firstAfter = time.Now()
					served.Add(1)
				}
				mu.Lock()
				successes = append(successes, time.Now())
				mu.Unlock()
			}
		})
	}

	time.Sleep(cfg.killAfter)
	victim, pid := killMaster(t, cfg, workers[0].key)
	killed := time.Now()
	killedNanos.Store(killed.UnixNano())
	t.Logf("killed the master %s (pid %d) %v into the load", victim, pid, killed.Sub(start).Round(time.Millisecond))
	// Once a replica has taken over, the dead node comes back (as an
	// orchestrator would restart it) and rejoins as a replica, so that
	// its shard can again confirm saves to a replica. Restarting it
	// before the failover would bring back an empty master.
	restarted := make(chan error, 1)
	go func() { restarted <- restartAfterFailover(cfg, victim) }()
	// The load goes on for the time asked, and past it until every
	// session has been served again (at most a minute after the kill),
	// then a little longer to measure the recovered throughput.
	for time.Since(start) < cfg.duration || served.Load() < int64(len(workers)) && time.Since(killed) < time.Minute {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(cfg.duration / 4)
	stop.Store(true)
	deadline := time.Now()
	wg.Wait()
	if err := <-restarted; err != nil {
		t.Errorf("bring the killed node back: %v", err)
	}

	var res result
	mu.Lock()
	slices.SortFunc(successes, func(a, b time.Time) int { return a.Compare(b) })
	var firstAfter time.Time
	var nBefore, nAfter int
	for _, at := range successes {
		if at.Before(killed) {
			nBefore++
			continue
		}
		nAfter++
		if firstAfter.IsZero() {
			firstAfter = at
		}
	}
	mu.Unlock()
	// The outage is the time from the kill until every session is served
	// again: the last session's first success after the kill.
	for _, w := range workers {
		res.acked += len(w.acked)
		res.failed += w.failures
		if w.firstAfter.IsZero() {
			t.Fatalf("session %s was never served again after the kill (last errors: %v)", w.key.ID, lastErrors(workers))
		}
		res.outage = max(res.outage, w.firstAfter.Sub(killed))
	}
	res.before = float64(nBefore) / killed.Sub(start).Seconds()
	res.after = float64(nAfter) / deadline.Sub(firstAfter).Seconds()

	// Every acknowledged message must be in its session, in order. A save
	// that failed may or may not be there (it can have reached the master
	// without enough replicas): those are not promised.
	for _, w := range workers {
		sess, err := loadEventually(ctx, store, w.key)
		if err != nil {
			if len(w.acked) > 0 {
				t.Errorf("session %s: %v, with %d acknowledged turns", w.key.ID, err, len(w.acked))
			}
			continue
		}
		stored := make([]string, len(sess.Messages))
		for i, m := range sess.Messages {
			stored[i] = m.Content
		}
		j := 0
		for _, msg := range stored {
			if j < len(w.acked) && msg == w.acked[j] {
				j++
			}
		}
		if j < len(w.acked) {
			res.lost += len(w.acked) - j
			missing := w.acked[j]
			if !slices.Contains(stored, missing) {
				t.Errorf("session %s lost the acknowledged %q (%d stored, %d acknowledged)", w.key.ID, missing, len(stored), len(w.acked))
			} else {
				res.unordered++
				t.Errorf("session %s holds its acknowledged turns out of order at %q", w.key.ID, missing)
			}
		}
		_ = store.Delete(ctx, w.key)
	}
	summary := fmt.Sprintf("scale: %s wait_replicas=%d workers=%d: %d turns acknowledged, %d failed; %.0f turns/s before the kill, %.0f after recovery; every session served again %v after the kill; %d acknowledged turns lost",
		scheme(cfg.url), cfg.waitReplicas, cfg.workers, res.acked, res.failed, res.before, res.after, res.outage.Round(time.Millisecond), res.lost)
	t.Log(summary)
	fmt.Println(summary)
	if res.acked == 0 {
		t.Fatal("nothing was acknowledged")
	}
}

// turn is one session turn as a run makes it: lock and load, then append
// one message and release in one save.
func turn(ctx context.Context, s runtime.Store, key runtime.SessionKey, msg string) error {
	_, lease, err := s.Acquire(ctx, key)
	if err != nil {
		return err
	}
	_, err = s.Save(ctx, key, lease, runtime.Write{Messages: []runtime.Message{{Role: "user", Content: msg}}, Release: true})
	if err != nil {
		_ = s.Release(context.WithoutCancel(ctx), key, lease)
	}
	return err
}

// loadEventually reads a session, retrying while the store recovers.
func loadEventually(ctx context.Context, s runtime.Store, key runtime.SessionKey) (*runtime.Session, error) {
	var err error
	for range 100 {
		var sess *runtime.Session
		sess, err = s.Load(ctx, key)
		if err == nil || errors.Is(err, runtime.ErrNotFound) {
			return sess, err
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil, err
}

// killMaster SIGKILLs the master that holds key's session: the Cluster
// master of its slot, or Sentinel's current master.
func killMaster(t *testing.T, cfg config, key runtime.SessionKey) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var addr string
	if cfg.master != "" {
		sc := redis.NewSentinelClient(&redis.Options{Addr: cfg.seeds[0]})
		defer sc.Close()
		hp, err := sc.GetMasterAddrByName(ctx, cfg.master).Result()
		if err != nil {
			t.Fatalf("sentinel: master address: %v", err)
		}
		addr = hp[0] + ":" + hp[1]
	} else {
		cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cfg.seeds})
		defer cc.Close()
		// The session's keys share the hash tag {<principal>:<id>}.
		node, err := cc.MasterForKey(ctx, "{"+key.Principal+":"+key.ID+"}")
		if err != nil {
			t.Fatalf("cluster: master for the session: %v", err)
		}
		addr = node.Options().Addr
	}
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		t.Fatalf("INFO of %s: %v", addr, err)
	}
	pid := 0
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "process_id:"); ok {
			pid, _ = strconv.Atoi(v)
		}
	}
	if pid <= 0 {
		t.Fatalf("no process_id in INFO of %s", addr)
	}
	// Only the script's own processes are killed: they listen on its
	// private ports, never on the shared 6379.
	if strings.HasSuffix(addr, ":6379") {
		t.Fatalf("refusing to kill %s", addr)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill %d: %v", pid, err)
	}
	return addr, pid
}

// restartAfterFailover waits until another node serves what victim held,
// then runs SWITCHBOARD_SCALE_RESTART with PORT set to victim's port.
func restartAfterFailover(cfg config, victim string) error {
	cmdline := os.Getenv("SWITCHBOARD_SCALE_RESTART")
	if cmdline == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		addr, err := currentMaster(ctx, cfg, victim)
		if err == nil && addr != victim {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no failover away from %s: %v", victim, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	_, port, _ := strings.Cut(victim, ":")
	cmd := exec.Command("bash", "-c", cmdline)
	cmd.Env = append(os.Environ(), "PORT="+port)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v\n%s", cmdline, err, out)
	}
	return nil
}

// currentMaster is the master now serving what victim served: Sentinel's
// master, or, on a Cluster, the master of the first slot victim held, as
// a live node reports it.
func currentMaster(ctx context.Context, cfg config, victim string) (string, error) {
	if cfg.master != "" {
		for _, s := range cfg.seeds {
			sc := redis.NewSentinelClient(&redis.Options{Addr: s})
			hp, err := sc.GetMasterAddrByName(ctx, cfg.master).Result()
			sc.Close()
			if err == nil {
				return hp[0] + ":" + hp[1], nil
			}
		}
		return "", errors.New("no sentinel answers")
	}
	for _, s := range cfg.seeds {
		if s == victim {
			continue
		}
		c := redis.NewClient(&redis.Options{Addr: s})
		nodes, err := c.ClusterNodes(ctx).Result()
		c.Close()
		if err != nil {
			continue
		}
		// The victim is marked failed and no longer holds slots once its
		// replica has been promoted.
		for line := range strings.SplitSeq(nodes, "\n") {
			f := strings.Fields(line)
			if len(f) >= 8 && strings.HasPrefix(f[1], victim+"@") {
				if strings.Contains(f[2], "fail") && !strings.Contains(f[2], "fail?") && len(f) == 8 {
					return "promoted", nil
				}
				return victim, nil
			}
		}
	}
	return "", errors.New("no cluster node answers")
}

func lastErrors(ws []*worker) []string {
	seen := map[string]bool{}
	var out []string
	for _, w := range ws {
		if w.lastErr != nil && !seen[w.lastErr.Error()] {
			seen[w.lastErr.Error()] = true
			out = append(out, w.lastErr.Error())
		}
	}
	return out
}

func scheme(u string) string {
	s, _, _ := strings.Cut(u, "://")
	return s
}
