package upstream_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
	"github.com/switchboard-ai/switchboard/internal/gwtest"
	"github.com/switchboard-ai/switchboard/internal/testenv"
)

func TestMain(m *testing.M) { testenv.VerifyNoLeaks(m) }

// faultsYAML has three graphs over three providers:
//   - desk: one agent on fake/desk-model;
//   - fallback: one agent on [fake/primary, fake2/backup];
//   - dead: one agent on a provider whose port nobody listens on;
//   - support: triage, which hands off to billing, both on fake;
//   - raw: one agent on a provider served by setup.raw;
//   - stall: one agent on provider stall, fake's server with a 300ms
//     stream_idle_timeout;
//   - oneshot: one agent on provider once, fake's server with max_retries 0.
//
// The gateway's own retry policy applies (2 retries, 250ms base delay): the
// config has no knob for it.
const faultsYAML = `
server:
  listen: 127.0.0.1:0
store:
  url: ${STORE_URL}
providers:
  fake:
    base_url: ${FAKE_URL}
    timeout: ${FAKE_TIMEOUT}
  fake2:
    base_url: ${FAKE2_URL}
    timeout: 5s
  dead:
    base_url: ${DEAD_URL}
    timeout: 10s
  raw:
    base_url: ${RAW_URL}
    timeout: 5s
  stall:
    base_url: ${FAKE_URL}
    stream_idle_timeout: 300ms
  once:
    base_url: ${FAKE_URL}
    max_retries: 0
agents:
  desk:
    description: Answers everything
    instructions: You are the desk.
    model: fake/desk-model
  relay:
    description: Answers with a fallback model
    instructions: You are the relay.
    model: [fake/primary, fake2/backup]
  ghost:
    description: Talks to a provider that is not there
    instructions: You are the ghost.
    model: dead/any
  scribe:
    description: Talks to a hand-written upstream
    instructions: You are the scribe.
    model: raw/any
  sleepy:
    description: Streams from a provider that may stall
    instructions: You are sleepy.
    model: stall/stall-model
  oneshot:
    description: Never retried
    instructions: You are oneshot.
    model: once/oneshot-model
  triage:
    description: Routes the user
    instructions: You are triage.
    model: fake/triage-model
    handoffs: [billing]
  billing:
    description: Answers billing questions
    instructions: You are billing.
    model: fake/billing-model
graphs:
  desk:
    lead: desk
  fallback:
    lead: relay
  dead:
    lead: ghost
  support:
    lead: triage
  raw:
    lead: scribe
  stall:
    lead: sleepy
  oneshot:
    lead: oneshot
`

// rig is a gateway in front of two fake upstreams.
type rig struct {
	gw *gwtest.Gateway
	// fake serves provider fake (desk-model and primary), fake2 provider
	// fake2 (backup).
	fake, fake2 *fakeupstream.Server
}

// setup configures a rig.
type setup struct {
	// timeout is provider fake's timeout; default 5s.
	timeout string
	// store is the session store URL; default memory://.
	store string
	// raw, when set, serves provider raw, for answers the fake upstream
	// cannot script; default: a closed port.
	raw http.Handler
}

// start starts a rig with empty scripts; tests Push their replies.
func start(t *testing.T, s setup) *rig {
	t.Helper()
	if s.timeout == "" {
		s.timeout = "5s"
	}
	if s.store == "" {
		s.store = "memory://"
	}
	r := &rig{fake: fakeupstream.New(t), fake2: fakeupstream.New(t)}
	rawURL := closedURL(t)
	if s.raw != nil {
		srv := httptest.NewServer(s.raw)
		t.Cleanup(srv.Close)
		rawURL = srv.URL + "/v1"
	}
	// Strict: the fakes refuse what strict servers refuse, so that a retry
	// or a fallback that sends a malformed request shows up.
	r.fake.SetStrict(true)
	r.fake2.SetStrict(true)
	r.gw = gwtest.Start(t, faultsYAML, map[string]string{
		"STORE_URL":    s.store,
		"FAKE_URL":     r.fake.URL,
		"FAKE_TIMEOUT": s.timeout,
		"FAKE2_URL":    r.fake2.URL,
		"DEAD_URL":     closedURL(t),
		"RAW_URL":      rawURL,
	})
	return r
}

// closedURL is a base URL on a port that refuses connections.
func closedURL(t *testing.T) string {
	t.Helper()
	return "http://" + testenv.RefusingAddr(t) + "/v1"
}

// chatBody is a one-user-message request, streamed or not.
func chatBody(model, text string, stream bool) map[string]any {
	b := gwtest.User(model, text)
	if stream {
		b["stream"] = true
	}
	return b
}

// streamChunk is what tests read of one SSE event: a chunk or an error.
type streamChunk struct {
	Choices []struct {
		Delta struct {
			Content *string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Metadata map[string]string `json:"metadata"`
	Error    *struct {
		Code    string `json:"code"`
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// streamed is a decoded SSE reply.
type streamed struct {
	chunks []streamChunk
	// text joins every content delta.
	text string
}

// errorEvent returns the stream's error event, which must be its last
// event, or nil.
func (s *streamed) errorEvent(t *testing.T) *streamChunk {
	t.Helper()
	for i, c := range s.chunks {
		if c.Error != nil {
			if i != len(s.chunks)-1 {
				t.Errorf("error event %d is followed by %d more events", i, len(s.chunks)-1-i)
			}
			return &s.chunks[i]
		}
	}
	return nil
}

// readStream decodes a 200 SSE reply; it fails unless the body ends with
// exactly one data: [DONE].
func readStream(t *testing.T, r *gwtest.Response) *streamed {
	t.Helper()
	if r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d type %q, want a 200 event stream: %s", r.Status, r.Header.Get("Content-Type"), r.Body)
	}
	data := gwtest.SSE(t, r.Body)
	if len(data) == 0 || data[len(data)-1] != "[DONE]" || slices.Index(data, "[DONE]") != len(data)-1 {
		t.Fatalf("stream does not end with one [DONE]:\n%s", r.Body)
	}
	out := &streamed{}
	var text strings.Builder
	for _, d := range data[:len(data)-1] {
		var c streamChunk
		if err := json.Unmarshal([]byte(d), &c); err != nil {
			t.Fatalf("event %q: %v", d, err)
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != nil {
				text.WriteString(*ch.Delta.Content)
			}
		}
		out.chunks = append(out.chunks, c)
	}
	out.text = text.String()
	return out
}

// replyText is the text of a 200 reply, streamed or not; a stream must end
// normally, without an error event.
func replyText(t *testing.T, r *gwtest.Response, stream bool) string {
	t.Helper()
	if stream {
		s := readStream(t, r)
		if e := s.errorEvent(t); e != nil {
			t.Fatalf("stream ended with error %+v", e.Error)
		}
		return s.text
	}
	if r.Status != http.StatusOK {
		t.Fatalf("status %d, want 200: %s", r.Status, r.Body)
	}
	var c gwtest.Completion
	r.Decode(t, &c)
	return c.Text()
}

// wantError checks an error answered with an HTTP status (before any byte of
// a stream).
func wantError(t *testing.T, r *gwtest.Response, status int, code string) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	if got := r.ErrorCode(t); got != code {
		t.Errorf("error code %q, want %q: %s", got, code, r.Body)
	}
}

// redisURL is the project's real Redis.
const redisURL = "redis://127.0.0.1:6379/0"

// stores runs f on each session store; Redis is skipped when unreachable,
// except in CI where that fails.
func stores(t *testing.T, f func(t *testing.T, storeURL string)) {
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		f(t, "memory://")
	})
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		testenv.NeedRedis(t)
		f(t, redisURL)
	})
}
