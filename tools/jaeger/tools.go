//go:build tools

// Package jaeger pins the Jaeger all-in-one binary used by the tracing
// end-to-end test. It lives in its own module so that Jaeger's dependency
// graph (which pins an older OpenTelemetry) never touches the gateway's go.mod.
package jaeger

import _ "github.com/jaegertracing/jaeger/cmd/jaeger"
