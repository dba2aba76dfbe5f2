package gateway_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
	"github.com/switchboard-ai/switchboard/internal/gwtest"
	"github.com/switchboard-ai/switchboard/internal/syncbuf"
)

// collector is a fake OTLP/HTTP endpoint that keeps every export's bytes.
type collector struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func newCollector(t *testing.T) (*collector, string) {
	c := &collector{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		c.buf.Write(b)
		c.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	return c, srv.URL
}

func (c *collector) bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]byte(nil), c.buf.Bytes()...)
}

// No prompt, completion or API key reaches spans or logs unless
// capture_content is on; with it on, prompts and completions do, keys never.
func TestNoContentInSpansOrLogs(t *testing.T) {
	const (
		userCanary       = "CANARY-USER-7f3a"
		completionCanary = "CANARY-COMPLETION-91bd"
		clientKey        = "CANARY-CLIENT-KEY-c0de"
		providerKey      = "CANARY-PROVIDER-KEY-beef"
	)
	for _, capture := range []bool{false, true} {
		t.Run(map[bool]string{false: "capture off", true: "capture on"}[capture], func(t *testing.T) {
			fake := fakeupstream.New(t,
				fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "transfer_to_billing", `{"reason":"`+userCanary+`"}`)}},
				fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c2", "broken_tool", `{}`)}},
				fakeupstream.Reply{Text: completionCanary},
			)
			tools := newToolServer(t)
			coll, collURL := newCollector(t)
			yaml := strings.Replace(deskYAML, "server:\n  listen: 127.0.0.1:0\n",
				"server:\n  api_keys: [{name: acme, key: "+clientKey+"}]\n", 1)
			yaml = strings.Replace(yaml, "    timeout: 5s\n", "    timeout: 5s\n    api_key: "+providerKey+"\n", 1)
			yaml += "telemetry:\n  otlp_endpoint: " + collURL + "\n"
			if capture {
				yaml += "  capture_content: true\n"
			}
			var logs syncbuf.Buffer
			cfg := gwtest.Compile(t, yaml, map[string]string{"FAKE_URL": fake.URL, "TOOLS_URL": tools.URL})
			gw := gwtest.StartLogging(t, cfg, &logs)

			c := completion(t, gw, gwtest.User("support", userCanary), map[string]string{"Authorization": "Bearer " + clientKey, "X-Session-Id": "canary"})
			if c.Text() != completionCanary {
				t.Fatalf("reply %q", c.Text())
			}
			gw.Close() // flush spans
			spans := string(coll.bytes())
			if !strings.Contains(spans, "invoke_agent") {
				t.Fatalf("no spans reached the collector (%d bytes)", len(spans))
			}
			for _, key := range []string{clientKey, providerKey} {
				if strings.Contains(spans, key) || strings.Contains(logs.String(), key) {
					t.Errorf("API key %s leaked into spans or logs", key)
				}
			}
			for _, content := range []string{userCanary, completionCanary} {
				if strings.Contains(logs.String(), content) {
					t.Errorf("content %s in logs:\n%s", content, logs.String())
				}
				if got := strings.Contains(spans, content); got != capture {
					t.Errorf("content %s on spans: %v, want %v", content, got, capture)
				}
			}
		})
	}
}
