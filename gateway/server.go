// Package gateway is Switchboard's HTTP face: the OpenAI-compatible routes,
// their errors, and the rendering of runs as JSON replies or SSE streams.
package gateway

import (
	"context"
	"crypto/subtle"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/runtime"
	"github.com/switchboard-ai/switchboard/telemetry"
)

// Options wires a Server. Config and Runner are required.
type Options struct {
	Config *graphs.Set
	// Runner runs graphs and owns sessions: the gateway reads, deletes
	// and checks them through it, never through a store.
	Runner *runtime.Runner
	// Responses keeps stored responses (POST /v1/responses with store);
	// nil runs every response unstored.
	Responses ResponseStore
	// Transport returns the HTTP transport of a provider, for passthrough:
	// the providers' own, with their timeouts and connection settings. Nil
	// (or a nil transport): http.DefaultTransport.
	Transport func(provider string) http.RoundTripper
	// Metrics records requests; nil records nothing.
	Metrics *telemetry.Metrics
	// Gatherer serves /metrics; nil serves an empty page.
	Gatherer prometheus.Gatherer
	// TracerProvider and Propagator trace requests; nil traces nothing.
	TracerProvider trace.TracerProvider
	Propagator     propagation.TextMapPropagator
	Logger         *slog.Logger
	// Limiter counts the rate limits of keys that have them; nil limits
	// nothing.
	Limiter Limiter
	// Memory reads and forgets memory slots' facts (/v1/memory); nil
	// answers every slot 404.
	Memory MemoryStore
}

// Server serves the gateway's routes.
type Server struct {
	opts     Options
	cfg      *graphs.Set
	log      *slog.Logger
	engine   *gin.Engine
	created  int64
	draining atomic.Bool
	// active counts /v1 requests in flight, for WaitIdle.
	active  atomic.Int64
	proxies map[string]*httputil.ReverseProxy
	// mcp serves POST /mcp (mcp.go).
	mcp http.Handler
}

// New builds a Server and its routes.
func New(opts Options) *Server {
	gin.SetMode(gin.ReleaseMode)
	s := &Server{opts: opts, cfg: opts.Config, log: opts.Logger, created: time.Now().Unix()}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.cfg.Server.Passthrough {
		s.proxies = newProxies(s.cfg.Providers, opts.Transport, s.log)
	}
	e := gin.New()
	e.ContextWithFallback = true
	// A known route asked with another method is 405 with Allow, not 404.
	e.HandleMethodNotAllowed = true
	// A path with a slash too many (or too few) is a 404 in the API's
	// error shape, behind the key check, not a bare redirect that skips it.
	e.RedirectTrailingSlash = false
	e.Use(gin.CustomRecoveryWithWriter(nil, func(c *gin.Context, err any) {
		s.log.Error("panic serving request", "path", c.Request.URL.Path, "panic", err)
		s.abort(c, &Error{Status: http.StatusInternalServerError, Code: codeInternal, Message: "internal error"})
	}))
	if opts.TracerProvider != nil {
		e.Use(telemetry.ServerMiddleware(opts.TracerProvider, opts.Propagator))
	}
	gatherer := opts.Gatherer
	if gatherer == nil {
		gatherer = prometheus.NewRegistry()
	}
	// The probes and /metrics answer HEAD as GET (net/http sends no
	// body): load balancers and uptime checks probe with either.
	for path, h := range map[string]gin.HandlerFunc{
		"/healthz": func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) },
		"/readyz":  s.readyz,
		"/metrics": gin.WrapH(promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{})),
	} {
		e.GET(path, h)
		e.HEAD(path, h)
	}

	v1 := e.Group("/v1", s.track, s.auth, s.rateLimit)
	v1.POST("/chat/completions", s.admitRun, s.chatCompletions)
	// Every GET route also answers HEAD, as HTTP asks of a server (RFC
	// 9110, 9.1): the same handler, whose body net/http does not send.
	get := func(path string, h gin.HandlerFunc) {
		v1.GET(path, h)
		v1.HEAD(path, h)
	}
	get("/models", s.listModels)
	get("/models/*id", s.getModel) // a graph's name may hold a "/"
	get("/graphs/*path", s.graphDiagram)
	get("/sessions", s.listSessions)
	get("/sessions/:id", s.getSession)
	v1.DELETE("/sessions/:id", s.deleteSession)
	v1.POST("/sessions/:id/approvals/:approvalId", s.decideApproval)
	v1.POST("/responses", s.admitRun, s.createResponse)
	get("/responses/:id", s.getResponse)
	get("/responses/:id/input_items", s.listInputItems)
	v1.DELETE("/responses/:id", s.deleteResponse)
	v1.POST("/responses/:id/cancel", s.cancelResponse)
	get("/memory/:slot", s.getMemory)
	v1.DELETE("/memory/:slot", s.deleteMemory)
	s.mcp = s.newMCPHandler()
	e.POST("/mcp", s.track, s.auth, s.rateLimit, s.admitRun, s.serveMCP)
	s.routeConsole(e)
	e.NoRoute(func(c *gin.Context) {
		if c.Request.URL.Path == "/console/" && c.Request.Method == http.MethodGet {
			// The console's page with a slash, as a person types it (the
			// API's paths get no such redirect: RedirectTrailingSlash).
			c.Redirect(http.StatusMovedPermanently, "/console")
			return
		}
		// Every /v1/... route needs a key, even one that does not exist:
		// without one, nothing is told about the API.
		if strings.HasPrefix(c.Request.URL.Path, "/v1/") {
			if s.auth(c); c.IsAborted() {
				return
			}
			// Counted as every request of the API is, with the
			// x-ratelimit-* headers a limited key's replies carry.
			if s.rateLimit(c); c.IsAborted() {
				return
			}
		}
		s.abort(c, errNoRoute(c))
	})
	e.NoMethod(func(c *gin.Context) {
		if p := c.Request.URL.Path; strings.HasPrefix(p, "/v1/") || p == "/mcp" {
			// A request of the API, counted as every one is, so that a
			// limited key's reply carries its x-ratelimit-* headers
			// (CONTRACT §13: on every reply of a limited key).
			if s.auth(c); c.IsAborted() {
				return
			}
			if s.rateLimit(c); c.IsAborted() {
				return
			}
		}
		s.abort(c, &Error{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed",
			Message: c.Request.Method + " is not allowed on " + c.Request.URL.Path + " (allowed: " + c.Writer.Header().Get("Allow") + ")"})
	})
	s.engine = e
	return s
}

// Handler returns the server's http.Handler.
func (s *Server) Handler() http.Handler { return s.engine }

// Drain makes /readyz answer 503 so that load balancers stop sending new
// requests, and refuses new runs with 503 draining, while open runs finish.
func (s *Server) Drain() { s.draining.Store(true) }

// admitRun refuses a new run once the server drains: the process is about
// to exit, and a run started now would be cut at the drain timeout.
func (s *Server) admitRun(c *gin.Context) {
	if s.draining.Load() {
		c.Header("Connection", "close")
		s.abort(c, &Error{Status: http.StatusServiceUnavailable, Code: codeDraining, Message: "the gateway is shutting down; retry on another instance"})
	}
}

// WaitIdle waits until no /v1 request is in flight, or ctx is done. The
// listener stays open meanwhile, so that probes read /readyz 503 rather
// than a refused connection while runs and streams finish.
func (s *Server) WaitIdle(ctx context.Context) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for s.active.Load() > 0 {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// track counts a request in flight until it has been answered.
func (s *Server) track(c *gin.Context) {
	s.active.Add(1)
	defer s.active.Add(-1)
	c.Next()
}

// abort answers err in the OpenAI error shape.
func (s *Server) abort(c *gin.Context, err *Error) {
	c.AbortWithStatusJSON(err.Status, err.body())
}

// principalKey is where auth leaves the caller's principal.
const principalKey = "switchboard.principal"

// auth checks the bearer key when keys are configured and records the
// key's name as the request's principal.
func (s *Server) auth(c *gin.Context) {
	keys := s.cfg.Server.APIKeys
	if len(keys) == 0 {
		return
	}
	// The scheme is case-insensitive (RFC 9110 §11.1): bearer works too.
	scheme, token, ok := strings.Cut(strings.TrimSpace(c.GetHeader("Authorization")), " ")
	if ok && strings.EqualFold(scheme, "Bearer") {
		token = strings.TrimSpace(token)
		for _, k := range keys {
			if subtle.ConstantTimeCompare([]byte(token), []byte(k.Key)) == 1 {
				c.Set(principalKey, k.Name)
				return
			}
		}
	}
	s.reject(c, &Error{Status: http.StatusUnauthorized, Code: codeInvalidAPIKey, Message: "a valid API key is required (Authorization: Bearer <key>)"})
}

// reject answers err for a request turned away before its handler (no key,
// over a rate limit). A run's request (chat, responses, MCP) is counted in
// the request metrics as its handler would have counted it, with no graph
// named: it was never read.
func (s *Server) reject(c *gin.Context, err *Error) {
	switch c.FullPath() {
	case "/v1/chat/completions", "/v1/responses", "/mcp":
		s.observe("", err.Status, err.Code, time.Now(), 0)
	}
	s.abort(c, err)
}

func principal(c *gin.Context) string { return c.GetString(principalKey) }

// readyz is 200 only when the store answers and the server is not draining.
// It needs no key, so it tells nothing of the store's address or errors:
// those go to the log.
func (s *Server) readyz(c *gin.Context) {
	if s.draining.Load() {
		c.JSON(http.StatusServiceUnavailable, gin.H{"status": "draining"})
		return
	}
	if err := s.opts.Runner.Ready(c.Request.Context()); err != nil {
		s.log.Warn("not ready: the session store does not answer", "err", err)
		c.JSON(http.StatusServiceUnavailable, gin.H{"status": "store unavailable"})
		return
	}
	c.JSON(http.StatusOK, gin.H{"status": "ok"})
}

// model is one graph as an OpenAI model object.
type model struct {
	ID          string `json:"id"`
	Object      string `json:"object"`
	Created     int64  `json:"created"`
	OwnedBy     string `json:"owned_by"`
	Description string `json:"description,omitempty"`
}

func (s *Server) model(g *graphs.Graph) model {
	return model{ID: g.Name, Object: "model", Created: s.created, OwnedBy: "switchboard", Description: g.Description}
}

func (s *Server) listModels(c *gin.Context) {
	data := make([]model, 0, len(s.cfg.GraphNames))
	for _, name := range s.cfg.GraphNames {
		data = append(data, s.model(s.cfg.Graphs[name]))
	}
	c.JSON(http.StatusOK, gin.H{"object": "list", "data": data})
}

func (s *Server) getModel(c *gin.Context) {
	id := strings.TrimPrefix(c.Param("id"), "/")
	g, ok := s.cfg.Graphs[id]
	if !ok {
		s.abort(c, &Error{Status: http.StatusNotFound, Code: codeModelNotFound, Param: "model", Message: "no graph named " + strconv.Quote(id)})
		return
	}
	c.JSON(http.StatusOK, s.model(g))
}

// errNoRoute is the 404 of a request no route serves.
func errNoRoute(c *gin.Context) *Error {
	return &Error{Status: http.StatusNotFound, Code: "not_found", Message: "no route " + c.Request.Method + " " + c.Request.URL.Path}
}
