package faults_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-ai/switchboard/internal/openapicheck"
)

// client talks to gateways under test. Unlike gwtest it never calls
// t.Fatal, so load goroutines may use it: failures come back as values.
type client struct {
	http *http.Client
	// check has OpenAI's published schema judge every whole answer; what
	// it refuses is collected and fails the test when it ends, so that no
	// fault a test tolerates can hide it.
	check   *openapicheck.Checker
	mu      sync.Mutex
	refused []string
}

func newClient(t *testing.T) *client {
	tr := &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 128, IdleConnTimeout: 5 * time.Second}
	t.Cleanup(tr.CloseIdleConnections)
	c := &client{http: &http.Client{Transport: tr, Timeout: 30 * time.Second}, check: openapicheck.ForTest(t)}
	t.Cleanup(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, r := range c.refused {
			t.Errorf("the published OpenAI schema refuses an answer: %s", r)
		}
	})
	return c
}

// attempt is one chat request of a session, as its client saw it.
type attempt struct {
	marker     string
	status     int    // 0 when the request got no answer
	code       string // error.code of an error answer
	err        error  // transport failure, or a 200 with the wrong reply
	start, end time.Time
}

func (a attempt) took() time.Duration { return a.end.Sub(a.start) }

func (a attempt) String() string {
	s := fmt.Sprintf("%s -> %d %s in %v", a.marker, a.status, a.code, a.took().Round(time.Millisecond))
	if a.err != nil {
		s += fmt.Sprintf(" (%v)", a.err)
	}
	return s
}

// turn sends one user message, marker, as a new turn of session id and
// checks that a 200 carries the fake upstream's acknowledgement of it.
func (c *client) turn(ctx context.Context, baseURL, id, marker string) (a attempt) {
	body := fmt.Sprintf(`{"model":"desk","messages":[{"role":"user","content":%q}]}`, marker)
	a = attempt{marker: marker, start: time.Now()}
	status, b, err := c.do(ctx, http.MethodPost, baseURL+"/v1/chat/completions", id, body)
	a.end = time.Now()
	a.status = status
	if err != nil {
		a.err = err
		return a
	}
	if status != http.StatusOK {
		a.code = errorCode(b)
		return a
	}
	var reply struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(b, &reply); err != nil || len(reply.Choices) != 1 {
		a.err = fmt.Errorf("200 with an unreadable reply: %s", b)
	} else if got := reply.Choices[0].Message.Content; got != ack(marker) {
		a.err = fmt.Errorf("200 replying %q, want %q", got, ack(marker))
	}
	return a
}

// do sends one request and reads the whole answer.
func (c *client) do(ctx context.Context, method, url, sessionID, body string) (int, []byte, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if sessionID != "" {
		req.Header.Set("X-Session-Id", sessionID)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("read answer: %w", err)
	}
	if c.check != nil {
		if _, err := c.check.CheckReply(method, req.URL.Path, resp.StatusCode, resp.Header.Get("Content-Type"), b); err != nil {
			c.mu.Lock()
			c.refused = append(c.refused, fmt.Sprintf("%s %s: %v", method, req.URL.Path, err))
			c.mu.Unlock()
		}
	}
	return resp.StatusCode, b, nil
}

// errorCode is error.code of an OpenAI error body, or the body itself when
// it is not one.
func errorCode(b []byte) string {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) != nil || e.Error.Code == "" {
		return "unreadable error body: " + string(b)
	}
	return e.Error.Code
}

// probe is one GET /readyz.
type probe struct {
	status     int // 0: no answer
	err        error
	start, end time.Time
}

func (c *client) readyz(ctx context.Context, baseURL string) probe {
	p := probe{start: time.Now()}
	p.status, _, p.err = c.do(ctx, http.MethodGet, baseURL+"/readyz", "", "")
	p.end = time.Now()
	return p
}

// storedMsg is a transcript entry as GET /v1/sessions/{id} shows it.
type storedMsg struct {
	Role    string `json:"role"`
	Content any    `json:"content"`
}

// transcript fetches a session's transcript; status 404 means the session
// does not exist.
func (c *client) transcript(ctx context.Context, baseURL, id string) (int, []storedMsg, error) {
	status, b, err := c.do(ctx, http.MethodGet, baseURL+"/v1/sessions/"+id, "", "")
	if err != nil || status != http.StatusOK {
		return status, nil, err
	}
	var s struct {
		ID         string      `json:"id"`
		Transcript []storedMsg `json:"transcript"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return status, nil, fmt.Errorf("session body: %w: %s", err, b)
	}
	if s.ID != id {
		return status, nil, fmt.Errorf("GET session %s answered session %q", id, s.ID)
	}
	return status, s.Transcript, nil
}

// mustTurns fetches a session and reads it as whole turns; a missing
// session has none.
func mustTurns(t *testing.T, c *client, baseURL, id string) []string {
	t.Helper()
	status, msgs, err := c.transcript(context.Background(), baseURL, id)
	switch {
	case err != nil:
		t.Fatalf("GET session %s: %v", id, err)
	case status == http.StatusNotFound:
		return nil
	case status != http.StatusOK:
		t.Fatalf("GET session %s: status %d", id, status)
	}
	markers, err := storedTurns(msgs)
	if err != nil {
		t.Fatalf("session %s: %v", id, err)
	}
	return markers
}

// newSessionID is unique per test run, so the shared Redis never mixes runs.
func newSessionID(t *testing.T, label string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := strings.Map(func(r rune) rune {
		if r < 128 && (r == '.' || r == '_' || r == '-' || r == ':' ||
			'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
			return r
		}
		return '.'
	}, t.Name())
	return name + "-" + label + "-" + hex.EncodeToString(b[:])
}
