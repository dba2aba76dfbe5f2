// Package gwtest starts a whole gateway, wired as `switchboard serve` wires
// it, on an httptest server in front of the project's fake upstream, so
// tests can drive the real HTTP API.
package gwtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/switchboard-ai/switchboard/cache/storetest"
	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/internal/app"
	"github.com/switchboard-ai/switchboard/internal/openapicheck"
	"github.com/switchboard-ai/switchboard/providers"
	"github.com/switchboard-ai/switchboard/runtime"
)

// Gateway is a running gateway under test.
type Gateway struct {
	URL    string
	Config *graphs.Set
	t      testing.TB
	close  func()
}

// Close stops the gateway and flushes its traces; the test's end does it
// too, so calling it is only needed to read what a shutdown flushes.
func (g *Gateway) Close() { g.close() }

// Start compiles yaml (with ${VAR} taken from env, then the process
// environment) and serves it until the test ends.
func Start(t testing.TB, yaml string, env map[string]string) *Gateway {
	t.Helper()
	return StartConfig(t, Compile(t, yaml, env))
}

// StartConfig serves a compiled config until the test ends.
func StartConfig(t testing.TB, cfg *graphs.Set) *Gateway {
	t.Helper()
	var w io.Writer = io.Discard
	if testing.Verbose() {
		w = os.Stderr
	}
	return StartLogging(t, cfg, w)
}

// StartLogging serves a compiled config, writing the gateway's logs (JSON,
// as serve writes them) to w.
func StartLogging(t testing.TB, cfg *graphs.Set, w io.Writer) *Gateway {
	t.Helper()
	return start(t, cfg, w, nil)
}

// StartListener serves a compiled config on the listener wrap makes of the
// test server's, for a test that watches the connections themselves.
func StartListener(t testing.TB, cfg *graphs.Set, wrap func(net.Listener) net.Listener) *Gateway {
	t.Helper()
	return start(t, cfg, io.Discard, wrap)
}

func start(t testing.TB, cfg *graphs.Set, w io.Writer, wrap func(net.Listener) net.Listener) *Gateway {
	t.Helper()
	log := slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
	// Every session a test runs checks that the gateway never writes to
	// the messages its store shares with it.
	readOnly := app.WrapStore(func(s runtime.Store) runtime.Store { return storetest.ReadOnly(t, s) })
	a, err := app.New(context.Background(), cfg, log, readOnly)
	if err != nil {
		t.Fatalf("app: %v", err)
	}
	// The gateway's own http.Server settings (timeouts) apply, as in serve.
	srv := httptest.NewUnstartedServer(a.Handler())
	a.ConfigureServer(srv.Config)
	if wrap != nil {
		srv.Listener = wrap(srv.Listener)
	}
	srv.Start()
	var once sync.Once
	closeFn := func() {
		once.Do(func() {
			srv.Close()
			_ = a.Close(context.Background())
		})
	}
	t.Cleanup(closeFn)
	return &Gateway{URL: srv.URL, Config: cfg, t: t, close: closeFn}
}

// Compile compiles yaml as Start does, with ${VAR} from env first.
func Compile(t testing.TB, yaml string, env map[string]string) *graphs.Set {
	t.Helper()
	getenv := func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		return os.Getenv(k)
	}
	cfg, err := graphs.Parse([]byte(yaml), providers.Builtin(getenv), getenv)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return cfg
}

// Response is an answer of the gateway.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into a generic map.
func (r *Response) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("body is not JSON: %v\n%s", err, r.Body)
	}
	return m
}

// Decode decodes the body into v.
func (r *Response) Decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("body: %v\n%s", err, r.Body)
	}
}

// ErrorCode returns error.code of an OpenAI error body.
func (r *Response) ErrorCode(t testing.TB) string {
	t.Helper()
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Type    string `json:"type"`
		} `json:"error"`
	}
	r.Decode(t, &e)
	return e.Error.Code
}

// Do sends a request; body may be a string, []byte or a value to encode.
func (g *Gateway) Do(ctx context.Context, method, path string, body any, header map[string]string) *Response {
	g.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		enc, err := json.Marshal(b)
		if err != nil {
			g.t.Fatal(err)
		}
		rd = bytes.NewReader(enc)
	}
	req, err := http.NewRequestWithContext(ctx, method, g.URL+path, rd)
	if err != nil {
		g.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		g.t.Fatalf("read: %v", err)
	}
	// Every reply a test sees is judged by OpenAI's published schema too.
	if c := openapicheck.ForTest(g.t); c != nil {
		if _, err := c.CheckReply(method, path, resp.StatusCode, resp.Header.Get("Content-Type"), out); err != nil {
			g.t.Errorf("%s %s: the published OpenAI schema refuses the reply: %v", method, path, err)
		}
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: out}
}

// Chat posts a chat completion request.
func (g *Gateway) Chat(body any, header map[string]string) *Response {
	g.t.Helper()
	return g.Do(context.Background(), http.MethodPost, "/v1/chat/completions", body, header)
}

// Completion is the part of a chat.completion tests read.
type Completion struct {
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Role      string  `json:"role"`
			Content   *string `json:"content"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
	Metadata struct {
		AgentName string `json:"agentName"`
		SessionID string `json:"sessionId"`
	} `json:"metadata"`
}

// Text is the first choice's content.
func (c *Completion) Text() string {
	if len(c.Choices) == 0 || c.Choices[0].Message.Content == nil {
		return ""
	}
	return *c.Choices[0].Message.Content
}

// SSE splits an SSE body into its data payloads, in order.
func SSE(t testing.TB, body []byte) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

// User is a one-message request body for model.
func User(model, text string) map[string]any {
	return map[string]any{"model": model, "messages": []map[string]any{{"role": "user", "content": text}}}
}
