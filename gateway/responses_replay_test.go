package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
	"github.com/switchboard-ai/switchboard/internal/gwtest"
)

// getStream retrieves a stored response's stream (GET ?stream=true, with
// query's other parameters); gwtest judges each event by the schemas.
func getStream(t *testing.T, gw *gwtest.Gateway, id, query string) ([]sseEvent, *respBody, []byte) {
	t.Helper()
	r := gw.Do(context.Background(), http.MethodGet, "/v1/responses/"+id+"?stream=true"+query, nil, nil)
	if r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("GET ?stream=true: %d %s %s", r.Status, r.Header.Get("Content-Type"), r.Body)
	}
	evs, resp := streamEvents(t, r.Body)
	return evs, resp, r.Body
}

// eventField reads one string field of each event, "" where it has none.
func eventField(evs []sseEvent, field string) []string {
	var out []string
	for _, e := range evs {
		var m map[string]any
		_ = json.Unmarshal(e.data, &m)
		s, _ := m[field].(string)
		out = append(out, s)
	}
	return out
}

// A stored response's stream, retrieved, is the stream that created it,
// event for event and byte for byte but for the final metadata in the
// first two events, and ends with the stored response exactly as GET
// returns it; a response that was not streamed is replayed with its text
// in one delta.
func TestResponsesStreamRetrieved(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		handoff := fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "transfer_to_billing", `{}`)}}
		weather := fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("w1", "get_weather", `{"city":"Oslo"}`)}}
		gw, _ := sessionDesk(t, storeURL,
			handoff, fakeupstream.Reply{StreamChunks: []string{"Billing ", "here, ", "streaming."}},
			handoff, weather,
			fakeupstream.Reply{Text: "cut sho", FinishReason: "length"},
		)
		inc := []string{"switchboard:handoffs"}

		// A streamed response with a handoff item and a message.
		live, r := stream(t, gw, input("charged twice", "include", inc), nil)
		evs, last, _ := getStream(t, gw, r.ID, "")
		if got, want := eventNames(evs), eventNames(live); !cmp.Equal(got, want) {
			t.Fatalf("replayed events:\n%v\nthe stream's:\n%v", got, want)
		}
		for i := 2; i < len(evs); i++ {
			if !bytes.Equal(evs[i].data, live[i].data) {
				t.Errorf("event %d replayed:\n%s\nstreamed:\n%s", i, evs[i].data, live[i].data)
			}
		}
		var deltas strings.Builder
		for i, e := range evs {
			if e.name == "response.output_text.delta" {
				deltas.WriteString(eventField(evs[i:i+1], "delta")[0])
			}
		}
		if deltas.String() != "Billing here, streaming." {
			t.Errorf("deltas: %q", deltas.String())
		}
		stored := getResp(gw, r.ID, nil)
		if !bytes.Equal(last.raw, stored.Body) {
			t.Errorf("the last event's response:\n%s\nGET:\n%s", last.raw, stored.Body)
		}
		var items []string
		for i, e := range evs {
			if e.name == "response.output_item.done" {
				var ev struct {
					Item struct{ ID string } `json:"item"`
				}
				_ = json.Unmarshal(evs[i].data, &ev)
				items = append(items, ev.Item.ID)
			}
		}
		if want := []string{r.Output[0].ID, r.Output[1].ID}; !cmp.Equal(items, want) {
			t.Errorf("item ids %v, stored %v", items, want)
		}

		// starting_after leaves out the events up to that number, as the
		// stream numbered them: a client that lost its end goes on.
		for _, n := range []int{3, 7, len(evs) - 2} {
			after, _, _ := getStream(t, gw, r.ID, "&starting_after="+strconv.Itoa(n))
			if len(after) != len(live)-n-1 {
				t.Fatalf("after %d: %v", n, eventNames(after))
			}
			for i, e := range after {
				if !bytes.Equal(e.data, live[n+1+i].data) {
					t.Errorf("after %d, event %d:\n%s\nstreamed:\n%s", n, n+1+i, e.data, live[n+1+i].data)
				}
			}
		}

		// A response that was not streamed: a client tool's call. Its
		// tool's parameters are echoed in every event as the client wrote
		// them (keys in their order, an integer past 2^53).
		params := `{"type":"object","properties":{"city":{"type":"string"},"n":{"type":"integer","maximum":9007199254740993}}}`
		tool := map[string]any{"type": "function", "name": "get_weather", "parameters": json.RawMessage(params)}
		r = create(t, gw, input("weather?", "tools", []any{tool}), nil)
		evs, last, _ = getStream(t, gw, r.ID, "")
		want := []string{"response.created", "response.in_progress", "response.output_item.added",
			"response.function_call_arguments.delta", "response.function_call_arguments.done", "response.output_item.done", "response.completed"}
		if !cmp.Equal(eventNames(evs), want) || eventField(evs, "delta")[3] != `{"city":"Oslo"}` || !bytes.Equal(last.raw, r.raw) {
			t.Errorf("function call replayed: %v %v\n%s", eventNames(evs), eventField(evs, "delta"), last.raw)
		}
		for _, e := range []sseEvent{evs[0], evs[1], evs[len(evs)-1]} {
			if !bytes.Contains(e.data, []byte(`"parameters":`+params)) {
				t.Errorf("%s does not echo the parameters as written: %s", e.name, e.data)
			}
		}

		// An incomplete response ends with response.incomplete, its
		// message incomplete.
		r = create(t, gw, input("more"), nil)
		evs, last, _ = getStream(t, gw, r.ID, "")
		names := eventNames(evs)
		if r.Status != "incomplete" || names[len(names)-1] != "response.incomplete" || !bytes.Equal(last.raw, r.raw) {
			t.Fatalf("incomplete replayed: %s %v", r.Status, names)
		}
		var done struct {
			Item struct{ Status string } `json:"item"`
		}
		_ = json.Unmarshal(evs[len(evs)-2].data, &done)
		if names[len(names)-2] != "response.output_item.done" || done.Item.Status != "incomplete" {
			t.Errorf("the message's end: %s %s", names[len(names)-2], evs[len(evs)-2].data)
		}
	})
}

// Retrieving a stream checks its parameters first; without stream, or
// with stream=false, GET answers the stored JSON.
func TestResponsesStreamRetrievedErrors(t *testing.T) {
	gw, _ := sessionDesk(t, "memory://", fakeupstream.Reply{Text: "hello"})
	r := create(t, gw, input("hi"), nil)
	for _, q := range []string{"", "?stream=false", "?stream=false&starting_after=x"} {
		got := getResp(gw, r.ID+q, nil)
		if got.Status != http.StatusOK || !bytes.Equal(got.Body, r.raw) || !strings.HasPrefix(got.Header.Get("Content-Type"), "application/json") {
			t.Errorf("GET %s: %d %s %s", q, got.Status, got.Header.Get("Content-Type"), got.Body)
		}
	}
	for q, param := range map[string]string{"?stream=yes": "stream", "?stream=true&starting_after=x": "starting_after",
		"?stream=true&starting_after=-2": "starting_after"} {
		got := getResp(gw, r.ID+q, nil)
		var e struct {
			Error struct{ Param string }
		}
		got.Decode(t, &e)
		if got.Status != http.StatusBadRequest || e.Error.Param != param {
			t.Errorf("GET %s: %d %s", q, got.Status, got.Body)
		}
	}
	if got := getResp(gw, "resp_0123abcd?stream=true", nil); got.Status != http.StatusNotFound || got.ErrorCode(t) != "response_not_found" {
		t.Errorf("unknown id: %d %s", got.Status, got.Body)
	}
}
