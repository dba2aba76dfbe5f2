// Package app wires Switchboard's parts into a running gateway: the one
// place that knows every concrete type. The command and the end-to-end
// tests both build the gateway through it.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/switchboard-ai/switchboard/cache"
	"github.com/switchboard-ai/switchboard/gateway"
	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/guardrails"
	"github.com/switchboard-ai/switchboard/internal/redact"
	"github.com/switchboard-ai/switchboard/mcptools"
	"github.com/switchboard-ai/switchboard/providers"
	"github.com/switchboard-ai/switchboard/runtime"
	"github.com/switchboard-ai/switchboard/telemetry"
	"github.com/switchboard-ai/switchboard/webhooks"
)

// App is a wired gateway. The store, tracing and metrics live as long as
// the process; the graphs, providers and routes are a generation that a
// config reload replaces (see reload.go).
type App struct {
	log     *slog.Logger
	tracing *telemetry.Tracing
	store   runtime.Store
	// responses keeps stored responses, beside the sessions.
	responses gateway.ResponseStore
	// memory keeps memory slots' facts, beside the sessions.
	memory  runtime.MemoryStore
	metrics *telemetry.Metrics
	// guardMetrics counts guardrail checks.
	guardMetrics *telemetry.GuardrailMetrics
	reg          *prometheus.Registry
	limiter      gateway.Limiter
	server       *http.Server
	gens         generations
	// base is every request's base context; endRuns cancels it, with
	// gateway.ErrShutdown, once the drain timeout has passed.
	base    context.Context
	endRuns context.CancelCauseFunc
}

// Option changes how New wires a gateway.
type Option func(*options)

type options struct {
	wrapStore func(runtime.Store) runtime.Store
}

// WrapStore has the gateway use wrap(store) for the session store it opens:
// tests watch what the gateway does with it.
func WrapStore(wrap func(runtime.Store) runtime.Store) Option {
	return func(o *options) { o.wrapStore = wrap }
}

// New wires a gateway for a validated config.
func New(ctx context.Context, cfg *graphs.Set, log *slog.Logger, opts ...Option) (*App, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	tracing, err := telemetry.Setup(ctx, cfg.Telemetry, log)
	if err != nil {
		return nil, fmt.Errorf("set up tracing: %w", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := telemetry.NewMetrics(reg)

	store, err := cache.Open(ctx, cache.Options{
		URL:             cfg.Store.URL,
		SessionTTL:      cfg.Store.SessionTTL,
		Timeout:         cfg.Store.Timeout,
		LockLease:       cfg.Store.LockLease,
		WaitReplicas:    cfg.Store.WaitReplicas,
		MaxSessionBytes: cfg.Store.MaxSessionBytes,
		TracerProvider:  tracing.Provider,
		Log:             log,
	})
	if err != nil {
		_ = tracing.Shutdown(ctx)
		return nil, fmt.Errorf("open session store: %w", err)
	}
	limiter := newLimiter(store)
	// Stored responses live beside the sessions; every store of cache
	// keeps them.
	responses, _ := store.(gateway.ResponseStore)
	memory, _ := store.(runtime.MemoryStore)
	if o.wrapStore != nil {
		store = o.wrapStore(store)
	}
	a := &App{log: log, tracing: tracing, store: store, responses: responses, memory: memory, metrics: metrics, reg: reg, limiter: limiter}
	a.gens.reloads = telemetry.NewReloads(reg)
	a.guardMetrics = telemetry.NewGuardrailMetrics(reg)
	gen, err := a.newGeneration(cfg, nil)
	if err != nil {
		_ = store.Close()
		_ = tracing.Shutdown(ctx)
		return nil, err
	}
	a.gens.cur.Store(gen)
	a.base, a.endRuns = context.WithCancelCause(context.Background())
	a.server = &http.Server{}
	a.ConfigureServer(a.server)
	return a, nil
}

// ConfigureServer sets srv's handler to the gateway's and its timeouts to
// the config's (CONTRACT §14): a request's headers and body must arrive
// within read_timeout, and a keep-alive connection idle for idle_timeout
// is closed. No write timeout is set: it would cut long streams, which
// stream_write_timeout bounds per write instead. Tests that serve the
// handler on their own listener use it too. The timeouts take effect at
// start (keepRestartSettings).
func (a *App) ConfigureServer(srv *http.Server) {
	cfg := a.gens.cur.Load().cfg.Server
	srv.Handler = a
	// Every request's context derives from the app's, so that the runs
	// still open when the drain timeout passes can be ended (Serve).
	srv.BaseContext = func(net.Listener) context.Context { return a.base }
	srv.ReadTimeout = cfg.ReadTimeout
	srv.ReadHeaderTimeout = cfg.ReadTimeout
	srv.IdleTimeout = cfg.IdleTimeout
	// What net/http itself reports (an accept that failed for want of a
	// file descriptor, a TLS handshake that failed) goes to the gateway's
	// log as a warning, not as a line of plain text in the JSON log.
	srv.ErrorLog = slog.NewLogLogger(a.log.Handler(), slog.LevelWarn)
}

// newGeneration wires what a config reload replaces: the providers, the MCP
// servers, the runner and the gateway's routes, over the process's store
// and metrics. It returns once every MCP server has answered or failed its
// first attempt, so that the tools of those that answered are offered from
// the first request. prev is the generation it replaces, nil at start: its
// MCP servers' tool lists carry over to those configured the same.
func (a *App) newGeneration(cfg *graphs.Set, prev *generation) (*generation, error) {
	models, err := providers.New(cfg.Providers, providers.Options{
		TracerProvider: a.tracing.Provider,
		Propagator:     a.tracing.Propagator,
		Logger:         a.log,
		CaptureContent: cfg.Telemetry.CaptureContent,
	})
	if err != nil {
		return nil, fmt.Errorf("set up providers: %w", err)
	}
	hooks := webhooks.New(a.tracing.Propagator)
	guard := guardrails.New(guardrails.Options{
		Judge: guardrails.Judges{
			graphs.GuardrailRegex: guardrails.Regex{},
			graphs.GuardrailHTTP:  hooks,
			graphs.GuardrailModel: guardrails.Model{Model: models},
		},
		TracerProvider: a.tracing.Provider,
		Metrics:        a.guardMetrics,
		Logger:         a.log,
	})
	servers := mcptools.New(cfg, mcptools.Options{Logger: a.log, Propagator: a.tracing.Propagator})
	if prev != nil {
		servers.Inherit(prev.mcp)
	}
	servers.Start(context.Background())
	runner := runtime.New(runtime.Options{
		Model: models,
		Store: a.store,
		Tools: runtime.ToolKinds{
			graphs.ToolHTTP:   hooks,
			graphs.ToolMemory: runtime.MemoryTools{Store: a.memory},
			graphs.ToolAgent:  runtime.SubagentRunner{},
			graphs.ToolMCP:    servers,
		},
		ToolSource:     servers,
		Memory:         a.memory,
		Hooks:          hooks,
		PreToolCall:    hooks,
		Interceptors:   []runtime.Interceptor{guard},
		TracerProvider: a.tracing.Provider,
		Metrics:        a.metrics,
		Logger:         a.log,
		CaptureContent: cfg.Telemetry.CaptureContent,
	})
	gw := gateway.New(gateway.Options{
		Config:         cfg,
		Runner:         runner,
		Responses:      a.responses,
		Transport:      models.Transport,
		Metrics:        a.metrics,
		Gatherer:       a.reg,
		TracerProvider: a.tracing.Provider,
		Propagator:     a.tracing.Propagator,
		Logger:         a.log,
		Limiter:        a.limiter,
		Memory:         a.memory,
	})
	return &generation{cfg: cfg, models: models, mcp: servers, gateway: gw, runner: runner, handler: gw.Handler()}, nil
}

// Handler returns the gateway's HTTP handler.
// Requests go to the generation current when they arrive.
func (a *App) Handler() http.Handler { return a }

// Serve serves on lns (one address's sockets: internal/listen) until ctx
// is done, then shuts down gracefully: /readyz turns 503 at once, open runs
// and streams get up to the drain timeout to finish, then the store and the
// trace exporter are flushed.
func (a *App) Serve(ctx context.Context, lns ...net.Listener) error {
	if len(lns) == 0 {
		return errors.New("serve: no listener")
	}
	errc := make(chan error, len(lns))
	for _, ln := range lns {
		go func() { errc <- a.server.Serve(ln) }()
	}
	cfg := a.gens.cur.Load().cfg
	a.log.Info("switchboard listening", "addr", lns[0].Addr().String(), "sockets", len(lns), "graphs", cfg.GraphNames, "store", redact.URL(cfg.Store.URL))
	var serveErr error
	select {
	case serveErr = <-errc:
		// One socket failed: the others stop too, as one listener's
		// failure stopped the gateway before.
		_ = a.server.Close()
		for range len(lns) - 1 {
			<-errc
		}
	case <-ctx.Done():
		cur := a.gens.drain()
		a.log.Info("shutting down", "drain_timeout", cur.cfg.Server.DrainTimeout)
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cur.cfg.Server.DrainTimeout)
		// Shutdown closes the listener at once; keep it open until the
		// runs in flight are done so that probes see /readyz 503.
		a.gens.waitIdle(dctx)
		if err := a.server.Shutdown(dctx); err != nil {
			// The runs still open end now, and answer their clients (503
			// draining; on a stream an error event and [DONE]) before
			// the connections close, rather than being cut mid-stream.
			a.log.Warn("drain timed out; ending the open runs and closing their connections", "err", err)
			a.endRuns(gateway.ErrShutdown)
			ectx, ecancel := context.WithTimeout(context.WithoutCancel(ctx), endGrace)
			a.gens.waitIdle(ectx)
			_ = a.server.Shutdown(ectx)
			ecancel()
			_ = a.server.Close()
		}
		cancel()
		for range lns {
			<-errc
		}
	}
	return errors.Join(ignoreClosed(serveErr), a.Close(context.WithoutCancel(ctx)))
}

// endGrace is how long the runs ended at the drain timeout get to answer
// their clients before the connections close.
const endGrace = 2 * time.Second

// Close releases the store and the provider connections, and flushes
// traces, after waiting (up to 5s) for on_approval_required calls.
func (a *App) Close(ctx context.Context) error {
	// on_approval_required calls in flight get up to 5s, then are
	// cancelled; the trace flush gets its own 5s.
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	a.gens.close(wctx)
	wcancel()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return errors.Join(a.store.Close(), a.tracing.Shutdown(ctx))
}

// newLimiter returns the rate limiter that counts where store keeps
// sessions: in Redis for the Redis store, so that every gateway on it
// shares the counts, else in this process.
func newLimiter(store runtime.Store) gateway.Limiter {
	if r, ok := store.(*cache.Redis); ok {
		return r.Limiter()
	}
	return cache.NewMemoryLimiter()
}

func ignoreClosed(err error) error {
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
