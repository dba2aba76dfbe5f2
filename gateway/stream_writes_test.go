package gateway_test

import (
	"encoding/json"
	"net"
	"slices"
	"sync/atomic"
	"testing"

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

// A stream's text leaves as it comes, a write for each delta (the first
// with the headers); what ends it (the finish chunk, the usage chunk when
// asked for, [DONE]) is made at one moment and leaves in one write, then
// the end of the chunked body in another, as a reverse proxy relays an
// upstream's last read. Each was a write of its own.
func TestStreamEndLeavesInOneWrite(t *testing.T) {
	fake := fakeupstream.New(t)
	counter := &writeCounter{}
	gw := gwtest.StartListener(t, gwtest.Compile(t, oneAgentYAML, map[string]string{"FAKE_URL": fake.URL}),
		func(l net.Listener) net.Listener { counter.Listener = l; return counter })
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
			resp := gw.Chat(body, nil)
			chunks := readStream(t, resp)
			got := counter.writes.Load() - before
			if got != tc.writes {
				t.Errorf("%d writes on the connection, want %d:\n%s", got, tc.writes, resp.Body)
			}
			last := chunks[len(chunks)-1]
			if tc.usage && last.Usage == nil {
				t.Errorf("no usage chunk last:\n%s", resp.Body)
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
	fake := fakeupstream.New(t, fakeupstream.Reply{StreamChunks: []string{"a", "b", "c"}})
	counter := &writeCounter{}
	gw := gwtest.StartListener(t, gwtest.Compile(t, oneAgentYAML, map[string]string{"FAKE_URL": fake.URL}),
		func(l net.Listener) net.Listener { counter.Listener = l; return counter })
	resp := gw.Do(t.Context(), "POST", "/v1/responses", map[string]any{"model": "gpt-6-astra", "stream": true, "input": "hi"}, nil)
	if resp.Status != 200 {
		t.Fatalf("status %d: %s", resp.Status, resp.Body)
	}
	// response.created alone, with the headers (the first write is made
	// as every stream's is); in_progress, output_item.added,
	// content_part.added and the first delta; the two other deltas; the
	// end; the chunked body's end.
	if got := counter.writes.Load(); got != 6 {
		t.Errorf("%d writes on the connection, want 6", got)
	}
	var types []string
	for i, d := range gwtest.SSE(t, resp.Body) {
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
