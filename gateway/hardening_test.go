package gateway_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
	"github.com/switchboard-ai/switchboard/internal/gwtest"
	"github.com/switchboard-ai/switchboard/internal/syncbuf"
)

// The tests of CONTRACT §14 that a client can drive: slow and silent
// clients on raw sockets, wrong methods, auth spelled differently. Timeouts
// are configured small; a test only ever asserts that something happened
// within a generous bound, never how fast.

// hardYAML is a one-agent graph on the fake upstream with small limits.
const hardYAML = `
server:
  read_timeout: 300ms
  idle_timeout: 300ms
  stream_write_timeout: 300ms
providers:
  fake: {base_url: "${FAKE_URL}", max_retries: 0}
agents:
  solo: {model: fake/m}
graphs:
  chat: {lead: solo}
`

func hardGateway(t *testing.T, yaml string, replies ...fakeupstream.Reply) (*gwtest.Gateway, *fakeupstream.Server) {
	t.Helper()
	fake := fakeupstream.New(t, replies...)
	return gwtest.Start(t, yaml, map[string]string{"FAKE_URL": fake.URL}), fake
}

// dial opens a raw connection to the gateway.
func dial(t *testing.T, gw *gwtest.Gateway) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(gw.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// closedWithin reads (and discards) what the server sends until it closes
// the connection, and reports whether that happened within d.
func closedWithin(conn net.Conn, d time.Duration) (bool, string) {
	_ = conn.SetReadDeadline(time.Now().Add(d))
	got, err := io.ReadAll(conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false, string(got)
	}
	return true, string(got)
}

func TestIdleKeepAliveConnectionIsClosed(t *testing.T) {
	gw, _ := hardGateway(t, hardYAML)
	conn := dial(t, gw)
	fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	resp.Body.Close()
	// Without idle_timeout the connection stays open for good (the issue:
	// 20,000 of them exhausted the gateway's file descriptors).
	if closed, _ := closedWithin(conn, 5*time.Second); !closed {
		t.Fatal("an idle keep-alive connection was still open 5s after idle_timeout 300ms")
	}
}

func TestSlowRequestBodyIsCut(t *testing.T) {
	for name, head := range map[string]string{
		"content-length": "Content-Length: 100000\r\n",
		"chunked":        "Transfer-Encoding: chunked\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			gw, fake := hardGateway(t, hardYAML)
			conn := dial(t, gw)
			fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n%s\r\n", head)
			if name == "chunked" {
				fmt.Fprintf(conn, "1\r\n{\r\n")
			}
			// One byte every 50ms, for longer than the test waits.
			stop := make(chan struct{})
			defer close(stop)
			go func() {
				tick := time.NewTicker(50 * time.Millisecond)
				defer tick.Stop()
				for i := 0; i < 200; i++ {
					select {
					case <-stop:
						return
					case <-tick.C:
					}
					chunk := " "
					if name == "chunked" {
						chunk = "1\r\n \r\n"
					}
					if _, err := io.WriteString(conn, chunk); err != nil {
						return
					}
				}
			}()
			closed, got := closedWithin(conn, 5*time.Second)
			if !closed {
				t.Fatal("a request body trickling in was still read 5s after read_timeout 300ms")
			}
			if got != "" && !strings.Contains(got, " 408 ") && !strings.Contains(got, " 400 ") {
				t.Errorf("answer to a body that timed out: %q", got)
			}
			if strings.Contains(got, "127.0.0.1") {
				t.Errorf("the answer names an internal address: %q", got)
			}
			if n := len(fake.Requests()); n != 0 {
				t.Errorf("upstream called %d times", n)
			}
		})
	}
}

func TestRunsOutliveTheReadTimeout(t *testing.T) {
	// The read timeout bounds reading a request, not answering it: a run or
	// a stream longer than it must not be cut (net/http's read deadline
	// stays set on the connection and would cancel the request's context).
	gw, _ := hardGateway(t, hardYAML,
		fakeupstream.Reply{Text: "slow answer", Delay: 900 * time.Millisecond},
		fakeupstream.Reply{StreamChunks: []string{"a", "b", "c", "d", "e"}, ChunkDelay: 250 * time.Millisecond},
	)
	r := gw.Chat(gwtest.User("chat", "hi"), nil)
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), "slow answer") {
		t.Fatalf("a run longer than read_timeout: %d %s", r.Status, r.Body)
	}
	body := gwtest.User("chat", "hi")
	body["stream"] = true
	r = gw.Chat(body, nil)
	events := gwtest.SSE(t, r.Body)
	if r.Status != http.StatusOK || len(events) == 0 || events[len(events)-1] != "[DONE]" || !strings.Contains(string(r.Body), `"e"`) {
		t.Fatalf("a stream longer than read_timeout: %d %s", r.Status, r.Body)
	}
}

func TestWrongMethodIs405(t *testing.T) {
	gw, _ := hardGateway(t, hardYAML)
	for _, tc := range []struct{ method, path, allow string }{
		{http.MethodPut, "/v1/chat/completions", "POST"},
		{http.MethodGet, "/v1/chat/completions", "POST"},
		{http.MethodPost, "/v1/models", "GET"},
		{http.MethodPatch, "/v1/sessions/s1", "GET"},
		{http.MethodDelete, "/healthz", "GET"},
	} {
		r := gw.Do(context.Background(), tc.method, tc.path, nil, nil)
		if r.Status != http.StatusMethodNotAllowed || !strings.Contains(r.Header.Get("Allow"), tc.allow) {
			t.Errorf("%s %s: %d Allow %q %s", tc.method, tc.path, r.Status, r.Header.Get("Allow"), r.Body)
			continue
		}
		if code := r.ErrorCode(t); code != "method_not_allowed" {
			t.Errorf("%s %s: code %q", tc.method, tc.path, code)
		}
	}
	// Every GET route answers HEAD as GET, without a body: the probes,
	// /metrics, the API's reads and the console.
	for _, path := range []string{"/healthz", "/readyz", "/metrics", "/v1/models", "/v1/models/chat", "/v1/sessions", "/console", "/console/console.js"} {
		r := gw.Do(context.Background(), http.MethodHead, path, nil, nil)
		if r.Status != http.StatusOK || len(r.Body) != 0 || r.Header.Get("Content-Type") == "" {
			t.Errorf("HEAD %s: %d %q %q", path, r.Status, r.Header.Get("Content-Type"), r.Body)
		}
	}
	for _, path := range []string{"/v1/models/nope", "/v1/sessions/nope", "/v1/responses/resp_0123", "/v1/responses/resp_0123/input_items"} {
		if r := gw.Do(context.Background(), http.MethodHead, path, nil, nil); r.Status != http.StatusNotFound || len(r.Body) != 0 {
			t.Errorf("HEAD %s: %d %q, want 404 without a body", path, r.Status, r.Body)
		}
	}
	if r := gw.Do(context.Background(), http.MethodGet, "/v1/nope", nil, nil); r.Status != http.StatusNotFound {
		t.Errorf("an unknown route: %d", r.Status)
	}
}

func TestAuthorizationSchemeIsCaseInsensitive(t *testing.T) {
	yaml := strings.Replace(hardYAML, "server:\n", "server:\n  api_keys: [{name: acme, key: k-acme-1}]\n", 1)
	gw, _ := hardGateway(t, yaml, fakeupstream.Reply{Text: "ok"}, fakeupstream.Reply{Text: "ok"}, fakeupstream.Reply{Text: "ok"})
	for _, h := range []string{"Bearer k-acme-1", "bearer k-acme-1", "BEARER  k-acme-1"} {
		if r := gw.Chat(gwtest.User("chat", "hi"), map[string]string{"Authorization": h}); r.Status != http.StatusOK {
			t.Errorf("Authorization %q: %d %s", h, r.Status, r.Body)
		}
	}
	for _, h := range []string{"", "Basic k-acme-1", "bearer", "k-acme-1", "bearer k-acme-2"} {
		if r := gw.Chat(gwtest.User("chat", "hi"), map[string]string{"Authorization": h}); r.Status != http.StatusUnauthorized {
			t.Errorf("Authorization %q: %d, want 401", h, r.Status)
		}
	}
	// A wrong method on a /v1 route tells nothing without a key.
	if r := gw.Do(context.Background(), http.MethodPut, "/v1/models", nil, nil); r.Status != http.StatusUnauthorized {
		t.Errorf("PUT /v1/models without a key: %d, want 401", r.Status)
	}
	// The five chat requests turned away are counted, with no graph; the
	// other routes' are not requests of runs.
	metrics := string(gw.Do(context.Background(), http.MethodGet, "/metrics", nil, nil).Body)
	if want := `switchboard_requests_total{code="invalid_api_key",graph="",status="401"} 5`; !strings.Contains(metrics, want) {
		t.Errorf("metrics lack %s", want)
	}
}

func TestProviderSecretsReachNoClientOrLog(t *testing.T) {
	// A hostile upstream: a 401 that echoes the Authorization header it got,
	// a 500 that echoes the whole request, a connection reset.
	const key = "sk-live-HardeningKey0042"
	const prompt = "the launch code is 0000-1111-2222 please keep it"
	var calls atomic.Int32
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch calls.Add(1) {
		case 1:
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, `{"error":{"message":"invalid key, you sent Authorization: %s","type":"invalid_request_error"}}`, r.Header.Get("Authorization"))
		case 2:
			w.WriteHeader(http.StatusInternalServerError)
			w.Write(body)
		default:
			conn, _, _ := http.NewResponseController(w).Hijack()
			conn.(*net.TCPConn).SetLinger(0)
			conn.Close()
		}
	}))
	t.Cleanup(upstream.Close)
	var logs syncbuf.Buffer
	cfg := gwtest.Compile(t, `
providers:
  fake: {base_url: "${FAKE_URL}", api_key: "${KEY}", max_retries: 0}
agents:
  solo: {model: fake/m}
graphs:
  chat: {lead: solo}
`, map[string]string{"FAKE_URL": upstream.URL, "KEY": key})
	gw := gwtest.StartLogging(t, cfg, &logs)
	for i, want := range []string{"status 401", "status 500", "connection"} {
		r := gw.Chat(gwtest.User("chat", prompt), nil)
		if r.Status != http.StatusBadGateway || !strings.Contains(string(r.Body), want) {
			t.Errorf("call %d: %d %s, want 502 saying %q", i+1, r.Status, r.Body, want)
		}
		for _, secret := range []string{"HardeningKey0042", "0000-1111-2222", "127.0.0.1"} {
			if strings.Contains(string(r.Body), secret) {
				t.Errorf("call %d: the client was told %q: %s", i+1, secret, r.Body)
			}
		}
	}
	for _, secret := range []string{"HardeningKey0042", "0000-1111-2222"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the log holds %q:\n%s", secret, logs.String())
		}
	}
	if !strings.Contains(logs.String(), "model call failed") {
		t.Errorf("the failures were not logged:\n%s", logs.String())
	}
}

func TestSessionSizeIsBounded(t *testing.T) {
	// Issue 23: 12 turns of 3 MiB made a 37.7 MB session. Here turns of
	// about 20 KB against a 64 KB bound: the fourth is refused whole.
	yaml := strings.Replace(hardYAML, "providers:", "store: {max_session_bytes: 65536}\nproviders:", 1)
	gw, fake := hardGateway(t, yaml)
	fake.SetFallback(func(fakeupstream.Request) fakeupstream.Reply { return fakeupstream.Reply{Text: "noted"} })
	session := map[string]string{"X-Session-Id": "big-" + strconv.FormatInt(time.Now().UnixNano(), 36)}
	chunk := strings.Repeat("0123456789", 2000)
	for turn := 1; turn <= 3; turn++ {
		if r := gw.Chat(gwtest.User("chat", chunk), session); r.Status != http.StatusOK {
			t.Fatalf("turn %d: %d %s", turn, r.Status, r.Body)
		}
	}
	r := gw.Chat(gwtest.User("chat", chunk), session)
	if r.Status != http.StatusRequestEntityTooLarge || r.ErrorCode(t) != "session_too_large" {
		t.Fatalf("a turn past max_session_bytes: %d %s", r.Status, r.Body)
	}
	var sess struct {
		Version    int              `json:"version"`
		Transcript []map[string]any `json:"transcript"`
	}
	gw.Do(context.Background(), http.MethodGet, "/v1/sessions/"+session["X-Session-Id"], nil, nil).Decode(t, &sess)
	if sess.Version != 3 || len(sess.Transcript) != 6 {
		t.Errorf("after the refused turn: version %d, %d messages; want 3 and 6 (nothing saved)", sess.Version, len(sess.Transcript))
	}
	// The session is not locked by the refused turn.
	if r := gw.Chat(gwtest.User("chat", "short"), session); r.Status != http.StatusOK {
		t.Errorf("a short turn after the refused one: %d %s", r.Status, r.Body)
	}
}

func TestCorruptStoredSessionIs500NamingIt(t *testing.T) {
	u := os.Getenv("SWITCHBOARD_TEST_REDIS_URL")
	if u == "" {
		u = "redis://127.0.0.1:6379/0"
	}
	opts, err := redis.ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { rdb.Close() })
	if err := rdb.Ping(t.Context()).Err(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redis at %s is needed in CI: %v", u, err)
		}
		t.Skipf("redis at %s does not answer: %v", u, err)
	}
	yaml := strings.Replace(hardYAML, "providers:", "store: {url: \""+u+"\"}\nproviders:", 1)
	yaml = strings.Replace(yaml, "server:\n", "server:\n  api_keys: [{name: hardening, key: k-hard-1}]\n", 1)
	gw, fake := hardGateway(t, yaml)
	fake.SetFallback(func(fakeupstream.Request) fakeupstream.Reply { return fakeupstream.Reply{Text: "ok"} })
	id := "corrupt-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	head := map[string]string{"X-Session-Id": id, "Authorization": "Bearer k-hard-1"}
	meta := "sb:{hardening:" + id + "}:meta"
	t.Cleanup(func() {
		rdb.Del(context.Background(), meta, "sb:{hardening:"+id+"}:msgs", "sb:{hardening:"+id+"}:lock")
	})
	if r := gw.Chat(gwtest.User("chat", "hi"), head); r.Status != http.StatusOK {
		t.Fatalf("first turn: %d %s", r.Status, r.Body)
	}
	if err := rdb.HSet(t.Context(), meta, "version", "not-a-number").Err(); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*gwtest.Response{
		gw.Chat(gwtest.User("chat", "again"), head),
		gw.Do(context.Background(), http.MethodGet, "/v1/sessions/"+id, nil, head),
	} {
		if r.Status != http.StatusInternalServerError || r.ErrorCode(t) != "session_corrupt" || !strings.Contains(string(r.Body), id) {
			t.Errorf("a corrupt session: %d %s, want 500 session_corrupt naming %s", r.Status, r.Body, id)
		}
	}
	// Deleting it starts over.
	if r := gw.Do(context.Background(), http.MethodDelete, "/v1/sessions/"+id, nil, head); r.Status != http.StatusNoContent {
		t.Errorf("DELETE: %d %s", r.Status, r.Body)
	}
	if r := gw.Chat(gwtest.User("chat", "fresh"), head); r.Status != http.StatusOK {
		t.Errorf("after DELETE: %d %s", r.Status, r.Body)
	}
}

func TestToolFanOutIsBounded(t *testing.T) {
	// Issue 23: a model asking for 2,000 tool calls in one turn got 5,837
	// goroutines and every call run. Here 200 calls against a cap of 10,
	// at most 3 at once.
	var calls, now, peak atomic.Int64
	tools := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		n := now.Add(1)
		defer now.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(20 * time.Millisecond)
		io.WriteString(w, `{"ok": true}`)
	}))
	t.Cleanup(tools.Close)
	many := make([]fakeupstream.ToolCall, 200)
	for i := range many {
		many[i] = fakeupstream.ToolCall{ID: fmt.Sprintf("c%d", i), Name: "work", Arguments: "{}"}
	}
	fake := fakeupstream.New(t, fakeupstream.Reply{ToolCalls: many}, fakeupstream.Reply{Text: "done"})
	gw := gwtest.Start(t, `
providers:
  fake: {base_url: "${FAKE_URL}", max_retries: 0}
tools:
  work: {http: {url: "${TOOL_URL}"}}
agents:
  solo: {model: fake/m, tools: [work]}
graphs:
  chat: {lead: solo, max_tool_calls_per_turn: 10, tool_concurrency: 3}
`, map[string]string{"FAKE_URL": fake.URL, "TOOL_URL": tools.URL})
	if r := gw.Chat(gwtest.User("chat", "go"), nil); r.Status != http.StatusOK {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	if calls.Load() != 10 || peak.Load() > 3 {
		t.Errorf("%d tool calls run, at most %d at once; want 10, at most 3", calls.Load(), peak.Load())
	}
	// The model is told which calls were refused, each with its result.
	second := fake.Requests()[1].Parsed.Messages
	refused, ok := 0, 0
	for _, m := range second {
		if m.Role != "tool" {
			continue
		}
		switch {
		case strings.Contains(m.Text(), `"limit_exceeded"`):
			refused++
		case strings.Contains(m.Text(), `"ok": true`):
			ok++
		}
	}
	if refused != 190 || ok != 10 {
		t.Errorf("tool results: %d run, %d limit_exceeded; want 10 and 190", ok, refused)
	}
}

func TestSilentStreamClientIsDropped(t *testing.T) {
	// Issue 23: a stream client that never reads held its run, its session
	// lock and its upstream call; the next turn got 409. With
	// stream_write_timeout (300ms here) it is dropped as on a disconnect.
	chunks := make([]string, 20000)
	for i := range chunks {
		chunks[i] = strings.Repeat("x", 1000)
	}
	gw, fake := hardGateway(t, hardYAML, fakeupstream.Reply{StreamChunks: chunks}, fakeupstream.Reply{Text: "the next turn"})
	session := "silent-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	conn := dial(t, gw)
	_ = conn.(*net.TCPConn).SetReadBuffer(4096)
	body := `{"model":"chat","stream":true,"messages":[{"role":"user","content":"stream to me"}]}`
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Session-Id: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", session, len(body), body)
	// Never read from conn.
	first := waitRequest(t, fake, 1)
	select {
	case <-first.Canceled:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream call of a stream nobody reads was still open 10s after stream_write_timeout 300ms")
	}
	var r *gwtest.Response
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if r = gw.Chat(gwtest.User("chat", "next"), map[string]string{"X-Session-Id": session}); r.Status != http.StatusConflict {
			break
		}
	}
	if r.Status != http.StatusOK {
		t.Fatalf("the next turn: %d %s", r.Status, r.Body)
	}
	var sess struct {
		Transcript []struct {
			Content string `json:"content"`
		} `json:"transcript"`
	}
	gw.Do(context.Background(), http.MethodGet, "/v1/sessions/"+session, nil, nil).Decode(t, &sess)
	if len(sess.Transcript) != 2 || strings.Contains(sess.Transcript[0].Content, "stream to me") {
		t.Errorf("the dropped stream's step was stored: %+v", sess.Transcript)
	}
}

// TestReadingStreamClientOutlastsWriteTimeout: a client that takes its
// stream as it comes is never dropped, however long the stream lasts. The
// stream here lasts 1.2 s, four times stream_write_timeout (300ms), and the
// guard moves the write deadline forward only once a sixteenth of it has
// passed (writetimeout.go): a deadline set once, or moved too late, cuts it.
func TestReadingStreamClientOutlastsWriteTimeout(t *testing.T) {
	chunks := make([]string, 12)
	for i := range chunks {
		chunks[i] = "w" + strconv.Itoa(i) + " "
	}
	gw, _ := hardGateway(t, hardYAML, fakeupstream.Reply{StreamChunks: chunks, ChunkDelay: 100 * time.Millisecond})
	body := gwtest.User("chat", "take your time")
	body["stream"] = true
	r := gw.Chat(body, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("stream: status %d, body %s", r.Status, r.Body)
	}
	events := gwtest.SSE(t, r.Body)
	if len(events) == 0 || events[len(events)-1] != "[DONE]" {
		t.Fatalf("the stream did not end with [DONE]: %q", events)
	}
	var text strings.Builder
	for _, e := range events[:len(events)-1] {
		delta, ok := chatDelta(e)
		if !ok {
			t.Fatalf("chunk %q is not JSON", e)
		}
		text.WriteString(delta)
	}
	if got, want := text.String(), strings.Join(chunks, ""); got != want {
		t.Errorf("streamed text %q, want %q", got, want)
	}
}

// waitRequest waits for the n-th request to reach the fake upstream.
func waitRequest(t *testing.T, fake *fakeupstream.Server, n int) fakeupstream.Request {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reqs, err := fake.WaitRequests(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	return reqs[n-1]
}

func TestSamplingParamsTakeAnyJSONNumber(t *testing.T) {
	gw, fake := hardGateway(t, hardYAML)
	fake.SetFallback(func(fakeupstream.Request) fakeupstream.Reply { return fakeupstream.Reply{Text: "ok"} })
	r := gw.Chat(`{"model":"chat","messages":[{"role":"user","content":"hi"}],"max_tokens":1e3,"seed":7.0,"temperature":1e39,"top_p":0.5e0}`, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	got := fake.Requests()[0].Parsed
	if got.MaxTokens == nil || *got.MaxTokens != 1000 || got.Seed == nil || *got.Seed != 7 ||
		got.Temperature == nil || *got.Temperature != 1e39 || got.TopP == nil || *got.TopP != 0.5 {
		t.Errorf("sent to the provider: %s", fake.Requests()[0].Body)
	}
	for body, want := range map[string]string{
		`"max_tokens":1.5`:   "max_tokens must be an integer, not a JSON number with a fraction",
		`"max_tokens":"ten"`: "max_tokens must be an integer, not a JSON string",
		`"seed":1e30`:        "seed must be an integer, not a JSON number out of range",
	} {
		r := gw.Chat(`{"model":"chat","messages":[{"role":"user","content":"hi"}],`+body+`}`, nil)
		if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), want) {
			t.Errorf("%s: %d %s, want 400 saying %q", body, r.Status, r.Body, want)
		}
	}
}
