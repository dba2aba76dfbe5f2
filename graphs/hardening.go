package graphs

import "time"

// This file holds the settings of CONTRACT §14 that bound what a client or
// an upstream can make the gateway hold, their defaults, and how they are
// compiled.

// Defaults of the limits of CONTRACT §14.
const (
	// DefaultIdleTimeout closes a keep-alive connection idle this long.
	DefaultIdleTimeout = 60 * time.Second
	// DefaultReadTimeout bounds the arrival of a request's headers and body.
	DefaultReadTimeout = 30 * time.Second
	// DefaultStreamWriteTimeout drops a stream client that takes no bytes
	// for this long.
	DefaultStreamWriteTimeout = 30 * time.Second
	// DefaultMaxResponseBytes bounds one provider answer.
	DefaultMaxResponseBytes = 32 << 20
	// DefaultMaxSessionBytes bounds a stored transcript.
	DefaultMaxSessionBytes = 16 << 20
	// DefaultMaxToolCallsPerTurn bounds the tool calls of one model turn
	// that are run; later ones get limit_exceeded.
	DefaultMaxToolCallsPerTurn = 64
	// DefaultToolConcurrency bounds the server tools of one turn running
	// at once.
	DefaultToolConcurrency = 8
)

// compileServerLimits applies the timeouts of `server:`.
func compileServerLimits(r *rawServer, s *Server, p *problems) {
	s.IdleTimeout = duration(r.IdleTimeout, DefaultIdleTimeout, "server.idle_timeout", p)
	s.ReadTimeout = duration(r.ReadTimeout, DefaultReadTimeout, "server.read_timeout", p)
	s.StreamWriteTimeout = duration(r.StreamWriteTimeout, DefaultStreamWriteTimeout, "server.stream_write_timeout", p)
}

// compileStoreLimits applies store.max_session_bytes.
func compileStoreLimits(r *rawStore, s *Store, p *problems) {
	s.MaxSessionBytes = byteLimit(r.MaxSessionBytes, DefaultMaxSessionBytes, "store.max_session_bytes", p)
}

// compileProviderLimits applies a provider's max_response_bytes; left
// unset, it stays 0, which the providers package reads as the default.
func compileProviderLimits(r *rawProvider, prov *Provider, subject string, p *problems) {
	prov.MaxResponseBytes = byteLimit(r.MaxResponseBytes, prov.MaxResponseBytes, subject+": max_response_bytes", p)
}

// compileGraphLimits applies the per-turn tool limits of a graph.
func compileGraphLimits(r *rawGraph, g *Graph, subject string, p *problems) {
	g.MaxToolCallsPerTurn = limit(r.MaxToolCallsPerTurn, DefaultMaxToolCallsPerTurn, subject+": max_tool_calls_per_turn", p)
	g.ToolConcurrency = limit(r.ToolConcurrency, DefaultToolConcurrency, subject+": tool_concurrency", p)
}

// byteLimit applies a default to an optional size, which must be positive.
func byteLimit(v *int64, def int64, path string, p *problems) int64 {
	if v == nil {
		return def
	}
	if *v <= 0 {
		p.addf("%s: must be a positive number of bytes, got %d", path, *v)
		return def
	}
	return *v
}
