package mcp_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// collector is an OTLP/HTTP endpoint that keeps the spans exported to it.
type collector struct {
	url   string
	mu    sync.Mutex
	spans map[string]map[string]string // span name -> its string attributes
}

func newCollector(t *testing.T) *collector {
	c := &collector{spans: map[string]map[string]string{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var req coltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					attrs := map[string]string{}
					for _, kv := range sp.Attributes {
						attrs[kv.Key] = kv.Value.GetStringValue()
					}
					c.spans[sp.Name] = attrs
				}
			}
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	c.url = srv.URL
	return c
}

// span returns the string attributes of the span named name.
func (c *collector) span(t *testing.T, name string) map[string]string {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	attrs, ok := c.spans[name]
	if !ok {
		var names []string
		for n := range c.spans {
			names = append(names, n)
		}
		t.Fatalf("no span %q among %v", name, names)
	}
	return attrs
}
