package faults_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
	"github.com/switchboard-ai/switchboard/internal/gwtest"
)

// Every turn of these tests is one user message holding a marker,
// "<session label>.t<attempt>", answered by the fake upstream with
// ack(marker). A transcript is then readable as a list of markers, and any
// half-saved, duplicated or reordered turn shows.

// marker names attempt n of a session.
func marker(label string, n int) string { return fmt.Sprintf("%s.t%03d", label, n) }

// parseMarker splits a marker; ok is false for text that is not one.
func parseMarker(m string) (label string, n int, ok bool) {
	label, num, found := strings.Cut(m, ".t")
	if !found {
		return "", 0, false
	}
	n, err := strconv.Atoi(num)
	return label, n, err == nil
}

// ack is the fake upstream's reply to the turn with marker m.
func ack(m string) string { return "ack " + m }

// ackReply answers the request's last user message with its ack, after
// delay.
func ackReply(delay time.Duration) func(fakeupstream.Request) fakeupstream.Reply {
	return func(r fakeupstream.Request) fakeupstream.Reply {
		users := userTexts(r)
		if len(users) == 0 {
			return fakeupstream.Reply{Status: 400, Text: "no user message"}
		}
		return fakeupstream.Reply{Text: ack(users[len(users)-1]), Delay: delay}
	}
}

// userTexts lists the user messages a model call carried.
func userTexts(r fakeupstream.Request) []string {
	var out []string
	for _, m := range r.Parsed.Messages {
		if m.Role == "user" {
			out = append(out, m.Text())
		}
	}
	return out
}

// storedTurns reads a transcript as whole turns (user marker, assistant
// ack) and returns their markers; anything else is an error naming it.
func storedTurns(msgs []storedMsg) ([]string, error) {
	var markers []string
	for i := 0; i < len(msgs); i += 2 {
		u := msgs[i]
		text, _ := u.Content.(string)
		if u.Role != "user" {
			return nil, fmt.Errorf("message %d is %s %q, want the user message that opens a turn", i, u.Role, text)
		}
		if _, _, ok := parseMarker(text); !ok {
			return nil, fmt.Errorf("message %d is user %q, not a turn marker", i, text)
		}
		if i+1 >= len(msgs) {
			return nil, fmt.Errorf("turn %s is half saved: its user message ends the transcript", text)
		}
		a := msgs[i+1]
		if reply, _ := a.Content.(string); a.Role != "assistant" || reply != ack(text) {
			return nil, fmt.Errorf("turn %s is followed by %s %v, want assistant %q", text, a.Role, a.Content, ack(text))
		}
		markers = append(markers, text)
	}
	return markers, nil
}

// sessionLog is what a client knows of one session: every attempt, in the
// order it made them. It is safe for concurrent use.
type sessionLog struct {
	label, id string

	mu       sync.Mutex
	attempts []attempt
}

func (l *sessionLog) add(a attempt) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.attempts = append(l.attempts, a)
}

func (l *sessionLog) all() []attempt {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.attempts)
}

// okSince reports whether some attempt that started after t got a 200.
func (l *sessionLog) okSince(t time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, a := range l.attempts {
		if a.status == 200 && a.err == nil && a.start.After(t) {
			return true
		}
	}
	return false
}

// checkSession compares a session's stored turns with its client's
// attempts and returns every disagreement:
//   - stored turns are the session's own attempts, each once, in the order
//     they were made;
//   - a 200 is stored, unless it started before lostUntil (a store that lost
//     its data; zero for none);
//   - a 409 session_busy is absent: that run never held the session;
//   - a 503 store_unavailable may be either (Redis may have run the write
//     whose answer the gateway gave up on), but storedTurns already made
//     sure it is whole;
//   - nothing else happened: no other status, no transport failure.
func checkSession(l *sessionLog, stored []string, lostUntil time.Time) []string {
	var problems []string
	bad := func(format string, args ...any) {
		problems = append(problems, fmt.Sprintf("session %s: ", l.label)+fmt.Sprintf(format, args...))
	}
	attempts := l.all()
	index := make(map[string]int, len(attempts))
	for i, a := range attempts {
		index[a.marker] = i
	}
	last := -1
	isStored := make(map[string]bool, len(stored))
	for _, m := range stored {
		i, ok := index[m]
		switch {
		case !ok:
			bad("stored turn %s was never sent in this session", m)
		case isStored[m]:
			bad("turn %s is stored twice", m)
		case i < last:
			bad("turn %s is stored after %s, which was sent later", m, attempts[last].marker)
		}
		isStored[m] = true
		if ok && i > last {
			last = i
		}
	}
	for _, a := range attempts {
		switch {
		case a.err != nil:
			bad("%v", a)
		case a.status == 200:
			if !isStored[a.marker] && !a.start.Before(lostUntil) {
				bad("turn %s got 200 but is not stored", a.marker)
			}
		case a.status == 409 && a.code == "session_busy":
			if isStored[a.marker] {
				bad("turn %s got 409 session_busy but is stored", a.marker)
			}
		case a.status == 503 && a.code == "store_unavailable":
		default:
			bad("unexpected answer: %v", a)
		}
	}
	return problems
}

// checkHistories checks what every model call saw against the stored
// sessions (by label): a call of a stored turn carried exactly the stored
// turns up to it; when lossless, a call of a turn that was not stored
// carried exactly the stored turns sent before it. So no run worked on a
// stale transcript and no write was lost.
func checkHistories(reqs []fakeupstream.Request, stored map[string][]string, lossless bool) []string {
	var problems []string
	for _, r := range reqs {
		users := userTexts(r)
		if len(users) == 0 {
			problems = append(problems, fmt.Sprintf("a model call carried no user message: %s", r.Body))
			continue
		}
		own := users[len(users)-1]
		label, n, ok := parseMarker(own)
		turns, known := stored[label]
		if !ok || !known {
			continue // not a turn of the sessions checked here
		}
		var want []string
		if i := slices.Index(turns, own); i >= 0 {
			want = append(want, turns[:i+1]...)
		} else if lossless {
			for _, m := range turns {
				if _, k, _ := parseMarker(m); k < n {
					want = append(want, m)
				}
			}
			want = append(want, own)
		} else {
			continue
		}
		if !slices.Equal(users, want) {
			problems = append(problems, fmt.Sprintf("model call of %s carried turns %v, want %v", own, users, want))
		}
	}
	return problems
}

// report fails t with at most the first 20 problems.
func report(t *testing.T, problems []string) {
	t.Helper()
	if len(problems) == 0 {
		return
	}
	shown := problems[:min(len(problems), 20)]
	t.Errorf("%d problems:\n  %s", len(problems), strings.Join(shown, "\n  "))
}

// deskYAML is a one-agent graph "desk" on the fake upstream.
func deskYAML(fakeURL, store string) string {
	return fmt.Sprintf(`
server:
  listen: 127.0.0.1:0
  drain_timeout: 5s
store: %s
providers:
  fake:
    base_url: %s
    timeout: 10s
agents:
  desk:
    description: Answers everything
    instructions: You are the desk.
    model: fake/desk-model
graphs:
  desk:
    lead: desk
`, store, fakeURL)
}

// startDesk starts an in-process gateway for deskYAML.
func startDesk(t *testing.T, fake *fakeupstream.Server, store string) *gwtest.Gateway {
	t.Helper()
	return gwtest.Start(t, deskYAML(fake.URL, store), nil)
}
