package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
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

// replayed lists a stream's events as a replay renders them: the deltas
// of one text part (consecutive) as one.
func replayed(evs []sseEvent) []string {
	var out []string
	for _, e := range evs {
		if e.name == "response.output_text.delta" && len(out) > 0 && out[len(out)-1] == e.name {
			continue
		}
		out = append(out, e.name)
	}
	return out
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

// A stored response's stream, retrieved, is the event sequence its own
// stream carried (a text part's deltas in one), under the stored items'
// ids, and ends with the stored response exactly as GET returns it; for a
// response that was not streamed too.
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
		if got, want := eventNames(evs), replayed(live); !cmp.Equal(got, want) {
			t.Errorf("replayed events:\n%v\nthe stream's:\n%v", got, want)
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

		// starting_after leaves out the events up to that number.
		after, _, _ := getStream(t, gw, r.ID, "&starting_after=3")
		if !cmp.Equal(eventNames(after), eventNames(evs[4:])) || !cmp.Equal(eventField(after, "item_id"), eventField(evs[4:], "item_id")) {
			t.Errorf("after 3: %v\nwant %v", eventNames(after), eventNames(evs[4:]))
		}

		// A response that was not streamed: a client tool's call.
		body := input("weather?", "tools", []any{respWeatherTool})
		r = create(t, gw, body, nil)
		evs, last, _ = getStream(t, gw, r.ID, "")
		want := []string{"response.created", "response.in_progress", "response.output_item.added",
			"response.function_call_arguments.delta", "response.function_call_arguments.done", "response.output_item.done", "response.completed"}
		if !cmp.Equal(eventNames(evs), want) || eventField(evs, "delta")[3] != `{"city":"Oslo"}` || !bytes.Equal(last.raw, r.raw) {
			t.Errorf("function call replayed: %v %v\n%s", eventNames(evs), eventField(evs, "delta"), last.raw)
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
