package gateway_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
)

// messages lists the output's message items as "status:text".
func (r *respBody) messages() []string {
	var out []string
	for _, it := range r.Output {
		if it.Type != "message" {
			continue
		}
		s := it.Status + ":"
		for _, c := range it.Content {
			s += c.Text
		}
		out = append(out, s)
	}
	return out
}

// Each model turn that says something is a message item of its own: what
// billing says before it calls a server tool is not glued to what it says
// after. The stored response is the streamed one, and a reply that is not
// streamed has the same items.
func TestResponsesStreamMessagePerTurn(t *testing.T) {
	turns := func() []fakeupstream.Reply {
		return []fakeupstream.Reply{
			{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "transfer_to_billing", `{}`)}},
			{Text: "Let me check.", ToolCalls: []fakeupstream.ToolCall{toolCall("l1", "lookup_charges", `{}`)}},
			{Text: "You have two charges."},
		}
	}
	stores(t, func(t *testing.T, storeURL string) {
		gw, _ := sessionDesk(t, storeURL, append(turns(), turns()...)...)
		evs, r := stream(t, gw, input("charged twice"), nil)
		want := []string{"completed:Let me check.", "completed:You have two charges."}
		if diff := cmp.Diff(want, r.messages()); diff != "" {
			t.Errorf("streamed output (-want +got):\n%s", diff)
		}
		// The first message is done before the second is added.
		var order []string
		for _, ev := range evs {
			if ev.name != "response.output_item.added" && ev.name != "response.output_item.done" {
				continue
			}
			var e struct {
				OutputIndex int `json:"output_index"`
			}
			if err := json.Unmarshal(ev.data, &e); err != nil {
				t.Fatal(err)
			}
			order = append(order, strings.TrimPrefix(ev.name, "response.output_item.")+":"+strconv.Itoa(e.OutputIndex))
		}
		if diff := cmp.Diff([]string{"added:0", "done:0", "added:1", "done:1"}, order); diff != "" {
			t.Errorf("output_item events (-want +got):\n%s", diff)
		}
		got := getResp(gw, r.ID, nil)
		var stored respBody
		got.Decode(t, &stored)
		if got.Status != http.StatusOK || !cmp.Equal(stored.messages(), want) {
			t.Errorf("stored: %d %s", got.Status, got.Body)
		}
		if r := create(t, gw, input("charged twice"), nil); !cmp.Equal(r.messages(), want) {
			t.Errorf("not streamed, the same items: %v", r.messages())
		}
	})
}

// The response echoes the text.format the provider was asked for
// (response_format), not plain text, streamed or not.
func TestResponsesEchoesTextFormat(t *testing.T) {
	schema := map[string]any{"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}}}
	for _, tc := range []struct {
		name   string
		format any // nil: no text field
		want   string
	}{
		{"default", nil, `{"type":"text"}`},
		{"text", map[string]any{"type": "text"}, `{"type":"text"}`},
		{"json_object", map[string]any{"type": "json_object"}, `{"type":"json_object"}`},
		{"json_schema", map[string]any{"type": "json_schema", "name": "status", "description": "A status", "schema": schema, "strict": true},
			`{"type":"json_schema","name":"status","description":"A status","schema":{"properties":{"ok":{"type":"boolean"}},"type":"object"},"strict":true}`},
		{"json_schema, bare", map[string]any{"type": "json_schema", "name": "status", "schema": schema},
			`{"type":"json_schema","name":"status","description":"","schema":{"properties":{"ok":{"type":"boolean"}},"type":"object"},"strict":false}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gw, fake := sessionDesk(t, "memory://", fakeupstream.Reply{Text: `{"ok":true}`}, fakeupstream.Reply{Text: `{"ok":true}`})
			body := func() map[string]any {
				b := input("status?")
				if tc.format != nil {
					b["text"] = map[string]any{"format": tc.format}
				}
				return b
			}
			_, streamed := stream(t, gw, body(), nil)
			for i, r := range []*respBody{create(t, gw, body(), nil), streamed} {
				var echo struct {
					Text struct {
						Format json.RawMessage `json:"format"`
					} `json:"text"`
				}
				if err := json.Unmarshal(r.raw, &echo); err != nil {
					t.Fatal(err)
				}
				var got bytes.Buffer
				if err := json.Compact(&got, echo.Text.Format); err != nil || got.String() != tc.want {
					t.Errorf("reply %d: text.format %s, want %s", i, echo.Text.Format, tc.want)
				}
			}
			// The echo is what the provider was asked for: plain text is
			// not sent.
			var sent, echoed struct {
				Type string `json:"type"`
			}
			if rf := fake.Requests()[0].Parsed.ResponseFormat; len(rf) > 0 {
				_ = json.Unmarshal(rf, &sent)
			}
			_ = json.Unmarshal([]byte(tc.want), &echoed)
			if sent.Type != strings.TrimPrefix(echoed.Type, "text") {
				t.Errorf("response_format sent upstream: %s", fake.Requests()[0].Parsed.ResponseFormat)
			}
		})
	}
}
