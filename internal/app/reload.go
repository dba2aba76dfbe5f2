package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-ai/switchboard/gateway"
	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/mcptools"
	"github.com/switchboard-ai/switchboard/providers"
	"github.com/switchboard-ai/switchboard/runtime"
	"github.com/switchboard-ai/switchboard/telemetry"
)

// A config reload builds a new generation (providers, runner, routes) from
// the new config and swaps it in atomically: a request is served whole by
// the generation current when it arrived, so runs in flight finish on the
// graphs they started with while new requests see the new ones. An old
// generation's provider connections are closed once its last request is
// done. The store, tracing and metrics outlive every generation; settings
// that only take effect at start are kept as they were.

// generation is one config's way of serving requests.
type generation struct {
	cfg     *graphs.Set
	models  *providers.Registry
	mcp     *mcptools.Manager // the config's MCP servers, connected
	gateway *gateway.Server
	runner  *runtime.Runner
	handler http.Handler
	// refs counts requests this generation is serving.
	refs atomic.Int64
}

// generations holds the current generation and the retired ones that still
// serve requests.
type generations struct {
	cur     atomic.Pointer[generation]
	reloads *telemetry.Reloads

	mu       sync.Mutex // serialises reloads against each other and drain
	draining bool
	retiring map[*generation]struct{}
}

// errDraining refuses a reload once shutdown has begun.
var errDraining = errors.New("the gateway is shutting down")

// ServeHTTP serves r with the current generation.
func (a *App) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g := a.gens.acquire()
	defer g.refs.Add(-1)
	g.handler.ServeHTTP(w, r)
}

// acquire returns the current generation with a reference taken. The check
// after the increment makes a retired generation that reads zero refs safe
// to close: any later taker sees it is no longer current and lets go.
func (gs *generations) acquire() *generation {
	for {
		g := gs.cur.Load()
		g.refs.Add(1)
		if gs.cur.Load() == g {
			return g
		}
		g.refs.Add(-1)
	}
}

// Reload serves cfg, a validated config, from now on. Settings that need a
// restart (see keepRestartSettings) keep their running values, with a
// warning. It fails, leaving the running config in place, only when the
// new providers cannot be set up or the gateway is shutting down.
func (a *App) Reload(cfg *graphs.Set) error {
	gs := &a.gens
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if gs.draining {
		return errDraining
	}
	old := gs.cur.Load()
	for _, name := range keepRestartSettings(old.cfg, cfg) {
		a.log.Warn("config reload: this setting needs a restart; keeping the running value", "setting", name)
	}
	g, err := a.newGeneration(cfg, old)
	if err != nil {
		return err
	}
	gs.cur.Store(g)
	if gs.retiring == nil {
		gs.retiring = make(map[*generation]struct{})
	}
	gs.retiring[old] = struct{}{}
	go a.retire(old)
	return nil
}

// retire closes g's provider connections once its last request is done.
func (a *App) retire(g *generation) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for g.refs.Load() > 0 {
		<-t.C
	}
	g.close(context.Background())
	a.gens.mu.Lock()
	delete(a.gens.retiring, g)
	a.gens.mu.Unlock()
}

// drain refuses further reloads, makes the current gateway answer /readyz
// 503, and returns the current generation.
func (gs *generations) drain() *generation {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	gs.draining = true
	g := gs.cur.Load()
	g.gateway.Drain()
	return g
}

// waitIdle waits until no generation serves a /v1 request, or ctx is done.
func (gs *generations) waitIdle(ctx context.Context) {
	gs.cur.Load().gateway.WaitIdle(ctx)
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		gs.mu.Lock()
		n := len(gs.retiring)
		gs.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// close closes every generation's provider connections and MCP servers,
// giving on_approval_required calls in flight until ctx is done.
func (gs *generations) close(ctx context.Context) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	gs.cur.Load().close(ctx)
	for g := range gs.retiring {
		g.close(ctx)
	}
}

// close closes g's provider connections and its MCP servers (a stdio
// server's process ends with them).
func (g *generation) close(ctx context.Context) {
	g.runner.Wait(ctx) // on_approval_required calls still in flight
	g.models.Close()
	g.mcp.Close()
}

// keepRestartSettings copies into next the settings that take effect only
// at start (the listen address and the HTTP server's timeouts, the store,
// the trace export), and returns
// the names of those that next would have changed.
func keepRestartSettings(cur, next *graphs.Set) []string {
	var changed []string
	if cur.Server.Listen != next.Server.Listen {
		changed = append(changed, "server.listen")
		next.Server.Listen = cur.Server.Listen
	}
	// The HTTP server's own timeouts are set once, on the listener.
	if cur.Server.ReadTimeout != next.Server.ReadTimeout || cur.Server.IdleTimeout != next.Server.IdleTimeout {
		changed = append(changed, "server.read_timeout/idle_timeout")
		next.Server.ReadTimeout = cur.Server.ReadTimeout
		next.Server.IdleTimeout = cur.Server.IdleTimeout
	}
	if cur.Server.ReadTimeout != next.Server.ReadTimeout || cur.Server.IdleTimeout != next.Server.IdleTimeout {
		changed = append(changed, "server.read_timeout/idle_timeout")
		next.Server.ReadTimeout = cur.Server.ReadTimeout
		next.Server.IdleTimeout = cur.Server.IdleTimeout
	}
	if !reflect.DeepEqual(cur.Store, next.Store) {
		changed = append(changed, "store")
		next.Store = cur.Store
	}
	if cur.Telemetry.ServiceName != next.Telemetry.ServiceName || cur.Telemetry.OTLPEndpoint != next.Telemetry.OTLPEndpoint {
		changed = append(changed, "telemetry.service_name/otlp_endpoint")
		next.Telemetry.ServiceName = cur.Telemetry.ServiceName
		next.Telemetry.OTLPEndpoint = cur.Telemetry.OTLPEndpoint
	}
	return changed
}

// problemsOf returns the lines of a config error: each problem of a
// *graphs.ConfigError, or the error itself (a file that cannot be read)
// phrased as serve phrases it at start.
func problemsOf(err error) []string {
	var ce *graphs.ConfigError
	if errors.As(err, &ce) {
		return ce.Problems
	}
	return []string{fmt.Sprintf("config invalid: %v", err)}
}
