package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
	"github.com/switchboard-ai/switchboard/internal/gwtest"
)

// writeCounter is a listener whose connections count the writes made on
// them: each is one system call, and on thousands of open streams each
// costs (issue 22).
type writeCounter struct {
	net.Listener
	writes atomic.Int64
}

func (l *writeCounter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countedConn{Conn: c, writes: &l.writes}, nil
}

type countedConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c *countedConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// gatedStream posts body to path and reads the stream as it comes. The
// upstream's reply waits on gate before each chunk after its first text
// (fakeupstream.Reply.Gate): gatedStream lets one go each time it reads an
// event isDelta calls a delta, and all the rest after the deltas-th. So
// each delta reaches the gateway in a read of its own, once the one before
// it has reached the client, as a stream's chunks do when the gateway
// keeps up. It returns the events' data.
func gatedStream(t *testing.T, gw *gwtest.Gateway, path string, body map[string]any, gate chan<- struct{}, deltas int, isDelta func(string) bool) []string {
	t.Helper()
	enc, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	// A delta the gateway held would never let the next chunk go: the
	// request fails at this deadline instead of hanging.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", gw.URL+path, bytes.NewReader(enc))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var events []string
	seen := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		d, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		events = append(events, d)
		if seen < deltas && isDelta(d) {
			if seen++; seen == deltas {
				close(gate)
			} else {
				gate <- struct{}{}
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if seen != deltas {
		t.Fatalf("%d deltas, want %d: %q", seen, deltas, events)
	}
	return events
}

// chatDelta returns the text of a chat chunk's choices, and false when d
// is not a chunk.
func chatDelta(d string) (string, bool) {
	var c struct {
		Choices []struct {
			Delta struct {
				Content string `json:"content"`
			} `json:"delta"`
		} `json:"choices"`
	}
	if json.Unmarshal([]byte(d), &c) != nil {
		return "", false
	}
	var text strings.Builder
	for _, ch := range c.Choices {
		text.WriteString(ch.Delta.Content)
	}
	return text.String(), true
}

// isChatDelta tells a chat chunk with text.
func isChatDelta(d string) bool {
	text, _ := chatDelta(d)
	return text != ""
}

// countingGateway starts a gateway on fake whose connections count the
// writes made on them.
func countingGateway(t *testing.T, fake *fakeupstream.Server) (*gwtest.Gateway, *writeCounter) {
	t.Helper()
	counter := &writeCounter{}
	gw := gwtest.StartListener(t, gwtest.Compile(t, oneAgentYAML, map[string]string{"FAKE_URL": fake.URL}),
		func(l net.Listener) net.Listener { counter.Listener = l; return counter })
	return gw, counter
}

// A stream's text leaves as it comes, a write for each delta (the first
// with the headers); what ends it (the finish chunk, the usage chunk when
// asked for, [DONE]) is made at one moment and leaves in one write, then
// the end of the chunked body in another, as a reverse proxy relays an
// upstream's last read. Each was a write of its own.
func TestStreamEndLeavesInOneWrite(t *testing.T) {
	fake := fakeupstream.New(t)
	gw, counter := countingGateway(t, fake)
	for _, tc := range []struct {
		name   string
		reply  fakeupstream.Reply
		usage  bool
		writes int64
	}{
		{"text", fakeupstream.Reply{StreamChunks: []string{"a", "b", "c"}}, false, 3 + 2},
		{"text and usage", fakeupstream.Reply{StreamChunks: []string{"a", "b", "c"}}, true, 3 + 2},
		// Nothing streamed before the end: the tool calls' chunk goes
		// first, with the headers (as a first write does), the finish
		// chunk, usage and [DONE] in the next.
		{"client tool call", fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{{ID: "c1", Name: "lookup", Arguments: `{}`}}}, true, 1 + 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gate := make(chan struct{})
			if tc.reply.StreamChunks != nil {
				tc.reply.Gate = gate
			}
			fake.Push(tc.reply)
			body := map[string]any{"model": "gpt-6-astra", "stream": true,
				"messages": []map[string]any{{"role": "user", "content": "hi"}}}
			if tc.usage {
				body["stream_options"] = map[string]any{"include_usage": true}
			}
			if tc.reply.ToolCalls != nil {
				body["tools"] = []map[string]any{{"type": "function", "function": map[string]any{"name": "lookup", "parameters": map[string]any{"type": "object"}}}}
			}
			before := counter.writes.Load()
			events := gatedStream(t, gw, "/v1/chat/completions", body, gate, len(tc.reply.StreamChunks), isChatDelta)
			got := counter.writes.Load() - before
			if got != tc.writes {
				t.Errorf("%d writes on the connection, want %d:\n%q", got, tc.writes, events)
			}
			var last struct {
				Usage *struct{} `json:"usage"`
			}
			if tc.usage && (len(events) < 2 || json.Unmarshal([]byte(events[len(events)-2]), &last) != nil || last.Usage == nil) {
				t.Errorf("no usage chunk last: %q", events)
			}
		})
	}
}

// Text the gateway reads from its provider in one read leaves in one
// write: the deltas of one read are held until the provider's stream is
// about to wait for more (runtime.StreamPauser), as a reverse proxy relays
// what one read brought. The first delta still leaves at once, with the
// headers. It was a write for each delta.
func TestStreamDeltasReadTogetherLeaveTogether(t *testing.T) {
	fake := fakeupstream.New(t)
	gw, counter := countingGateway(t, fake)
	for _, tc := range []struct {
		name   string
		path   string
		body   map[string]any
		writes int64
	}{
		// The first delta with the headers; the other two; the end; the
		// chunked body's end (5 before).
		{"chat", "/v1/chat/completions", map[string]any{"model": "gpt-6-astra", "stream": true,
			"messages": []map[string]any{{"role": "user", "content": "hi"}}}, 4},
		// response.created with the headers; in_progress to the three
		// deltas; the end; the chunked body's end (6 before).
		{"responses", "/v1/responses", map[string]any{"model": "gpt-6-astra", "stream": true, "input": "hi"}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake.Push(fakeupstream.Reply{StreamChunks: []string{"a", "b", "c"}, Together: true})
			before := counter.writes.Load()
			resp := gw.Do(t.Context(), "POST", tc.path, tc.body, nil)
			if resp.Status != 200 {
				t.Fatalf("status %d: %s", resp.Status, resp.Body)
			}
			if got := counter.writes.Load() - before; got != tc.writes {
				t.Errorf("%d writes on the connection, want %d:\n%s", got, tc.writes, resp.Body)
			}
			var text strings.Builder
			for _, d := range gwtest.SSE(t, resp.Body) {
				var ev struct {
					Type  string `json:"type"`
					Delta string `json:"delta"`
				}
				if d == "[DONE]" || json.Unmarshal([]byte(d), &ev) != nil {
					continue
				}
				if ev.Type == "response.output_text.delta" {
					text.WriteString(ev.Delta + "|")
				}
				if delta, _ := chatDelta(d); delta != "" {
					text.WriteString(delta + "|")
				}
			}
			if text.String() != "a|b|c|" {
				t.Errorf("deltas %q, want a|b|c|", text.String())
			}
		})
	}
}

// A Responses stream writes what one event of the run renders at once:
// the first text brings the response's and the message's opening events
// with its delta, and what ends the stream (output_text.done to
// response.completed, and [DONE]) leaves in one write. Each event was a
// write of its own: 13 for this stream.
func TestResponsesStreamWritesAnEventsRenderingAtOnce(t *testing.T) {
	gate := make(chan struct{})
	fake := fakeupstream.New(t, fakeupstream.Reply{StreamChunks: []string{"a", "b", "c"}, Gate: gate})
	gw, counter := countingGateway(t, fake)
	events := gatedStream(t, gw, "/v1/responses", map[string]any{"model": "gpt-6-astra", "stream": true, "input": "hi"}, gate, 3,
		func(d string) bool { return strings.Contains(d, `"type":"response.output_text.delta"`) })
	// response.created alone, with the headers (the first write is made
	// as every stream's is); in_progress, output_item.added,
	// content_part.added and the first delta; the two other deltas; the
	// end; the chunked body's end.
	if got := counter.writes.Load(); got != 6 {
		t.Errorf("%d writes on the connection, want 6", got)
	}
	var types []string
	for i, d := range events {
		if d == "[DONE]" {
			types = append(types, d)
			continue
		}
		var ev struct {
			Type string `json:"type"`
			Seq  int    `json:"sequence_number"`
		}
		if err := json.Unmarshal([]byte(d), &ev); err != nil || ev.Seq != i {
			t.Fatalf("event %d: %s (%v)", i, d, err)
		}
		types = append(types, ev.Type)
	}
	want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_text.delta", "response.output_text.delta", "response.output_text.done",
		"response.content_part.done", "response.output_item.done", "response.completed", "[DONE]"}
	if !slices.Equal(types, want) {
		t.Errorf("events %v, want %v", types, want)
	}
}
