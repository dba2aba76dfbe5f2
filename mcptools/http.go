package mcptools

import (
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/propagation"

	"github.com/switchboard-ai/switchboard/graphs"
)

// httpTransport is the SDK's streamable HTTP client for cfg, sending cfg's
// headers (and the caller's trace context) with every request.
func httpTransport(cfg *graphs.MCPServer, base http.RoundTripper, prop propagation.TextMapPropagator) mcp.Transport {
	return &mcp.StreamableClientTransport{
		Endpoint: cfg.URL,
		// No Timeout: the server's event stream stays open. Calls are
		// bounded by their own context.
		HTTPClient: &http.Client{Transport: &headerTransport{base: base, headers: cfg.Headers, prop: prop}, CheckRedirect: noRedirects},
		// The SDK would otherwise retry a broken stream for a while; the
		// manager reconnects a broken session itself, and a call on a dead
		// server must fail at once.
		MaxRetries: -1,
	}
}

// noRedirects makes a 3xx the answer, which the SDK takes for a failure:
// followed, the call's arguments would go to an address not in the config,
// with cfg's headers, which headerTransport sets on every request (net/http
// drops only its own Authorization on a redirect to another host).
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// newBaseTransport is the connection pool for a manager's HTTP servers.
func newBaseTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ResponseHeaderTimeout = 0 // the call's context bounds it
	t.IdleConnTimeout = 90 * time.Second
	return t
}

// headerTransport adds configured headers and the trace context.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
	prop    propagation.TextMapPropagator
}

// RoundTrip sends req with the headers set on a copy, as a RoundTripper may
// not change its request.
func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	for k, v := range t.headers {
		r.Header.Set(k, v)
	}
	if t.prop != nil {
		t.prop.Inject(r.Context(), propagation.HeaderCarrier(r.Header))
	}
	return t.base.RoundTrip(r)
}
