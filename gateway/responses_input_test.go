package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
	"github.com/switchboard-ai/switchboard/internal/gwtest"
	"github.com/switchboard-ai/switchboard/internal/openapicheck"
)

// inputList is a GET /v1/responses/{id}/input_items reply.
type inputList struct {
	Object  string `json:"object"`
	Data    []map[string]any
	FirstID string `json:"first_id"`
	LastID  string `json:"last_id"`
	HasMore bool   `json:"has_more"`
}

// listInput gets a response's input items with query q, checked against
// OpenAI's ResponseItemList.
func listInput(t *testing.T, gw *gwtest.Gateway, id, q string) inputList {
	t.Helper()
	r := gw.Do(context.Background(), http.MethodGet, "/v1/responses/"+id+"/input_items"+q, nil, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("input_items%s: %d %s", q, r.Status, r.Body)
	}
	if err := openapicheck.ForTest(t).Validate(openapicheck.ResponseItemList, r.Body); err != nil {
		t.Fatal(err)
	}
	var l inputList
	r.Decode(t, &l)
	return l
}

// ids lists the items' ids.
func (l inputList) ids() []string {
	var out []string
	for _, it := range l.Data {
		out = append(out, it["id"].(string))
	}
	return out
}

// A stored response lists the input of its own request, newest first by
// default, each item with an id and its content as parts: a string input
// is one user message, a message keeps the id it came with, and the input
// a continued response brought is not listed again.
func TestResponseInputItems(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		gw, _ := sessionDesk(t, storeURL,
			fakeupstream.Reply{Text: "Hello."},
			fakeupstream.Reply{Text: "Noted."},
		)
		r1 := create(t, gw, input("I was charged twice"), nil)
		l1 := listInput(t, gw, r1.ID, "")
		if l1.Object != "list" || len(l1.Data) != 1 || l1.HasMore || l1.FirstID != l1.LastID {
			t.Fatalf("r1's input items: %+v", l1)
		}
		m := l1.Data[0]
		if m["type"] != "message" || m["role"] != "user" || m["status"] != "completed" || !strings.HasPrefix(m["id"].(string), "msg_") {
			t.Fatalf("r1's item: %v", m)
		}
		if parts, _ := json.Marshal(m["content"]); string(parts) != `[{"text":"I was charged twice","type":"input_text"}]` {
			t.Fatalf("r1's content: %s", parts)
		}

		r2 := create(t, gw, map[string]any{"model": "support", "previous_response_id": r1.ID, "input": []any{
			map[string]any{"type": "message", "role": "developer", "content": "Answer briefly."},
			map[string]any{"type": "message", "id": "msg_client1", "role": "user", "content": "the card ends 42"},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "input_text", "text": "and refund me"}}},
		}}, nil)
		asc := listInput(t, gw, r2.ID, "?order=asc")
		if len(asc.Data) != 3 || asc.Data[0]["role"] != "developer" || asc.Data[1]["id"] != "msg_client1" || asc.Data[2]["role"] != "user" {
			t.Fatalf("r2's input items, ascending: %v", asc.Data)
		}
		if parts, _ := json.Marshal(asc.Data[2]["content"]); string(parts) != `[{"text":"and refund me","type":"input_text"}]` {
			t.Fatalf("a content list is not kept as it was: %s", parts)
		}
		desc := listInput(t, gw, r2.ID, "")
		if got, want := strings.Join(desc.ids(), ","), strings.Join([]string{asc.Data[2]["id"].(string), "msg_client1", asc.Data[0]["id"].(string)}, ","); got != want {
			t.Fatalf("descending ids %s, want %s", got, want)
		}

		// Pages: limit, has_more, after.
		p1 := listInput(t, gw, r2.ID, "?order=asc&limit=2")
		if len(p1.Data) != 2 || !p1.HasMore || p1.FirstID != asc.Data[0]["id"] || p1.LastID != "msg_client1" {
			t.Fatalf("first page: %+v", p1)
		}
		p2 := listInput(t, gw, r2.ID, "?order=asc&limit=2&after="+p1.LastID)
		if len(p2.Data) != 1 || p2.HasMore || p2.FirstID != asc.Data[2]["id"] {
			t.Fatalf("second page: %+v", p2)
		}

		for q, param := range map[string]string{"?limit=0": "limit", "?limit=101": "limit", "?limit=x": "limit", "?order=up": "order", "?after=msg_nope": "after"} {
			r := gw.Do(context.Background(), http.MethodGet, "/v1/responses/"+r2.ID+"/input_items"+q, nil, nil)
			if r.Status != http.StatusBadRequest || r.ErrorCode(t) != "invalid_request" || !strings.Contains(string(r.Body), `"param":"`+param+`"`) {
				t.Errorf("%s: %d %s", q, r.Status, r.Body)
			}
		}
		gone := gw.Do(context.Background(), http.MethodGet, "/v1/responses/resp_0123/input_items", nil, nil)
		if gone.Status != http.StatusNotFound || gone.ErrorCode(t) != "response_not_found" {
			t.Errorf("an unknown response: %d %s", gone.Status, gone.Body)
		}
	})
}

// A client tool's round trip in the input is listed as the items it came
// as: the function_call and its function_call_output.
func TestResponseInputItemsToolRoundTrip(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		gw, _ := sessionDesk(t, storeURL, fakeupstream.Reply{Text: "It is sunny."})
		r := create(t, gw, map[string]any{"model": "support", "input": []any{
			map[string]any{"role": "user", "content": "weather?"},
			map[string]any{"type": "function_call", "call_id": "call_7", "name": "get_weather", "arguments": `{"city":"Oslo"}`},
			map[string]any{"type": "function_call_output", "call_id": "call_7", "output": "sunny"},
		}}, nil)
		l := listInput(t, gw, r.ID, "?order=asc")
		if len(l.Data) != 3 {
			t.Fatalf("items: %v", l.Data)
		}
		call, out := l.Data[1], l.Data[2]
		if call["type"] != "function_call" || call["call_id"] != "call_7" || call["name"] != "get_weather" || call["arguments"] != `{"city":"Oslo"}` || call["status"] != "completed" {
			t.Errorf("the call: %v", call)
		}
		if out["type"] != "function_call_output" || out["call_id"] != "call_7" || out["output"] != "sunny" || out["status"] != "completed" || out["id"] == "" {
			t.Errorf("the output: %v", out)
		}
	})
}

// Content parts are listed in OpenAI's shapes whatever shape the request
// took: a history's assistant output_text without annotations, a text
// part of type text or input_text under any role, an image without detail,
// a tool output given as parts; each reply passes OpenAI's schema.
func TestResponseInputItemsShapes(t *testing.T) {
	user := func(content any) map[string]any { return map[string]any{"role": "user", "content": content} }
	part := func(typ, text string) map[string]any { return map[string]any{"type": typ, "text": text} }
	cases := []struct {
		name  string
		input []any
		want  []string // each item's content (or output), as JSON
	}{
		{"an assistant's output_text without annotations", []any{user("hi"),
			map[string]any{"role": "assistant", "content": []any{part("output_text", "Hello.")}}, user("again")},
			[]string{`[{"text":"hi","type":"input_text"}]`, `[{"annotations":[],"logprobs":[],"text":"Hello.","type":"output_text"}]`, `[{"text":"again","type":"input_text"}]`}},
		{"an assistant's input_text part", []any{user("hi"),
			map[string]any{"role": "assistant", "content": []any{part("input_text", "Hello.")}}, user("again")},
			[]string{`[{"text":"hi","type":"input_text"}]`, `[{"annotations":[],"logprobs":[],"text":"Hello.","type":"output_text"}]`, `[{"text":"again","type":"input_text"}]`}},
		{"a user's text part and an image without detail", []any{user([]any{part("text", "look"),
			map[string]any{"type": "input_image", "image_url": "https://example.com/a.png"}})},
			[]string{`[{"text":"look","type":"input_text"},{"detail":"auto","image_url":"https://example.com/a.png","type":"input_image"}]`}},
		{"a tool output as parts", []any{user("weather?"),
			map[string]any{"type": "function_call", "call_id": "call_7", "name": "get_weather", "arguments": `{}`},
			map[string]any{"type": "function_call_output", "call_id": "call_7", "output": []any{part("output_text", "sun"), part("output_text", "ny")}}},
			[]string{`[{"text":"weather?","type":"input_text"}]`, `null`, `"sunny"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gw, _ := sessionDesk(t, "memory://", fakeupstream.Reply{Text: "ok"})
			r := create(t, gw, map[string]any{"model": "support", "input": tc.input}, nil)
			l := listInput(t, gw, r.ID, "?order=asc")
			if len(l.Data) != len(tc.want) {
				t.Fatalf("%d items, want %d", len(l.Data), len(tc.want))
			}
			for i, it := range l.Data {
				v := it["content"]
				if it["type"] == "function_call_output" {
					v = it["output"]
				}
				if got, _ := json.Marshal(v); string(got) != tc.want[i] {
					t.Errorf("item %d: %s, want %s", i, got, tc.want[i])
				}
			}
		})
	}
}

// POST /v1/responses/{id}/cancel: every stored response has ended (the
// gateway runs none in the background), so cancelling one is 400, as
// OpenAI answers for a response not created in the background, and
// changes nothing; an unknown one is 404.
func TestCancelEndedResponse(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		gw, _ := sessionDesk(t, storeURL, fakeupstream.Reply{Text: "Hello."})
		r := create(t, gw, input("hi", "background", true), nil)
		if r.Status != "completed" {
			t.Fatalf("a background request: %s", r.raw)
		}
		c := gw.Do(context.Background(), http.MethodPost, "/v1/responses/"+r.ID+"/cancel", nil, nil)
		if c.Status != http.StatusBadRequest || c.ErrorCode(t) != "invalid_request" || !strings.Contains(string(c.Body), "is completed") {
			t.Errorf("cancel: %d %s", c.Status, c.Body)
		}
		if g := gw.Do(context.Background(), http.MethodGet, "/v1/responses/"+r.ID, nil, nil); g.Status != http.StatusOK || !strings.Contains(string(g.Body), `"status":"completed"`) {
			t.Errorf("after cancel: %d %s", g.Status, g.Body)
		}
		if c := gw.Do(context.Background(), http.MethodPost, "/v1/responses/resp_0123/cancel", nil, nil); c.Status != http.StatusNotFound || c.ErrorCode(t) != "response_not_found" {
			t.Errorf("cancel of an unknown response: %d %s", c.Status, c.Body)
		}
	})
}
