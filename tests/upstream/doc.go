// Package upstream holds end-to-end tests of how the gateway behaves when its
// providers misbehave: errors, rate limits, refused connections, timeouts,
// streams that die mid-way, per-agent fallback models, and sessions that
// must come out of a failed run untouched. The tests drive the real HTTP API
// (internal/gwtest) in front of scripted fake upstreams
// (internal/fakeupstream); the package has no code of its own.
package upstream
