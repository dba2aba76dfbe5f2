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

// principalDesk starts the desk on a store with an API key of the test's
// own, and returns the key's header and a lister of its sessions: the list
// is the principal's, whatever else shares the Redis.
func principalDesk(t *testing.T, storeURL string, fake *fakeupstream.Server) (*gwtest.Gateway, map[string]string, func() []string) {
	t.Helper()
	name := newSessionID(t)
	yaml := strings.Replace(deskYAML, "server:\n  listen: 127.0.0.1:0\n",
		"server:\n  listen: 127.0.0.1:0\n  api_keys: [{name: \""+name+"\", key: \"k-"+name+"\"}]\n", 1)
	gw := gwtest.Start(t, yaml+"store: {url: \""+storeURL+"\"}\n", map[string]string{"FAKE_URL": fake.URL, "TOOLS_URL": newToolServer(t).URL})
	key := map[string]string{"Authorization": "Bearer k-" + name}
	list := func() []string {
		t.Helper()
		var l struct {
			Data []struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		r := gw.Do(context.Background(), http.MethodGet, "/v1/sessions?limit=100", nil, key)
		if r.Status != http.StatusOK {
			t.Fatalf("list sessions: %d %s", r.Status, r.Body)
		}
		r.Decode(t, &l)
		var ids []string
		for _, s := range l.Data {
			ids = append(ids, s.ID)
		}
		return ids
	}
	return gw, key, list
}

// A stored response whose run fails before the client hears of its
// session (an HTTP error: no response id, no session header) leaves no
// session behind: not the one seeded with the input's history, not one
// holding the run's first steps, not a fork.
func TestFailedResponseLeavesNoSession(t *testing.T) {
	handoff := fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "transfer_to_billing", `{}`)}}
	fails := fakeupstream.Reply{Status: http.StatusInternalServerError}
	history := []any{
		map[string]any{"role": "user", "content": "hi"},
		map[string]any{"role": "assistant", "content": "hello"},
		map[string]any{"role": "user", "content": "charged twice"}}
	stores(t, func(t *testing.T, storeURL string) {
		fake := fakeupstream.New(t)
		gw, key, list := principalDesk(t, storeURL, fake)
		for _, tc := range []struct {
			name    string
			replies []fakeupstream.Reply
			body    map[string]any
		}{
			{"seeded history", []fakeupstream.Reply{fails}, map[string]any{"model": "support", "input": history}},
			{"seeded history, streamed", []fakeupstream.Reply{fails}, map[string]any{"model": "support", "input": history, "stream": true}},
			{"a handoff saved", []fakeupstream.Reply{handoff, fails}, input("charged twice")},
		} {
			fake.Push(tc.replies...)
			r := gw.Do(context.Background(), http.MethodPost, "/v1/responses", tc.body, key)
			if r.Status != http.StatusBadGateway || r.ErrorCode(t) != "upstream_error" {
				t.Fatalf("%s: %d %s", tc.name, r.Status, r.Body)
			}
			if h := r.Header.Get("X-Session-Id"); h != "" {
				t.Errorf("%s: the error names session %s", tc.name, h)
			}
			if ids := list(); len(ids) != 0 {
				t.Errorf("%s: sessions %v listed after the failed request, want none", tc.name, ids)
			}
		}
		// A fork from an older response that fails: only the original.
		fake.Push(fakeupstream.Reply{Text: "one"}, fakeupstream.Reply{Text: "two"}, fails)
		r1 := create(t, gw, input("hi"), key)
		create(t, gw, input("and?", "previous_response_id", r1.ID), key)
		r := gw.Do(context.Background(), http.MethodPost, "/v1/responses", input("again", "previous_response_id", r1.ID), key)
		if r.Status != http.StatusBadGateway {
			t.Fatalf("fork: %d %s", r.Status, r.Body)
		}
		if ids := list(); len(ids) != 1 || ids[0] != r1.Metadata["sessionId"] {
			t.Errorf("sessions %v after the failed fork, want only %s", ids, r1.Metadata["sessionId"])
		}
	})
}

// A stream whose run fails after it started ends with response.failed
// shaped like any reply: the usage of the model calls that answered, and
// agentName and sessionId naming where the saved steps are; the message
// the failure cut short is closed, incomplete, before it.
func TestResponsesFailedStream(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		gw, _ := sessionDesk(t, storeURL,
			fakeupstream.Reply{Text: "Let me get billing.", ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "transfer_to_billing", `{}`)},
				Usage: &fakeupstream.Usage{PromptTokens: 12, CompletionTokens: 4}},
			fakeupstream.Reply{StreamChunks: []string{"Your ", "charges"}, StreamError: "overloaded"},
			fakeupstream.Reply{Text: "Two charges of 42 USD."},
		)
		evs, r := stream(t, gw, input("charged twice"), nil)
		names := eventNames(evs)
		want := []string{"response.output_text.done", "response.content_part.done", "response.output_item.done", "response.failed"}
		if len(names) < len(want) || !cmp.Equal(names[len(names)-len(want):], want) {
			t.Fatalf("events: %v", names)
		}
		var done struct {
			OutputIndex int `json:"output_index"`
			Item        struct {
				Status string `json:"status"`
			} `json:"item"`
		}
		if err := json.Unmarshal(evs[len(evs)-2].data, &done); err != nil || done.OutputIndex != 1 || done.Item.Status != "incomplete" {
			t.Errorf("last output_item.done: %s", evs[len(evs)-2].data)
		}
		if r.Status != "failed" || !cmp.Equal(r.messages(), []string{"completed:Let me get billing.", "incomplete:Your charges"}) {
			t.Errorf("failed response: %s", r.raw)
		}
		if r.Usage.InputTokens != 12 || r.Usage.OutputTokens != 4 || r.Usage.TotalTokens != 16 {
			t.Errorf("usage %+v, want the handoff call's 12+4", r.Usage)
		}
		sid := r.Metadata["sessionId"]
		if r.Metadata["agentName"] != "billing" || sid == "" {
			t.Fatalf("metadata %v", r.Metadata)
		}
		if resp, s := getSession(t, gw, sid, nil); resp.Status != http.StatusOK || s.ActiveAgent != "billing" {
			t.Errorf("session %s: %d %s", sid, resp.Status, resp.Body)
		}
		// The client was given the response's id: it is stored, failed,
		// as OpenAI stores one, replays as it streamed, and can be
		// continued from the steps its run saved.
		if got := getResp(gw, r.ID, nil); got.Status != http.StatusOK || !bytes.Equal(got.Body, r.raw) {
			t.Errorf("GET the failed response: %d %s\nwant %s", got.Status, got.Body, r.raw)
		}
		replayed := gw.Do(context.Background(), http.MethodGet, "/v1/responses/"+r.ID+"?stream=true", nil, nil)
		if revs, _ := streamEvents(t, replayed.Body); eventNames(revs)[len(revs)-1] != "response.failed" {
			t.Errorf("replay: %v", eventNames(revs))
		}
		var next respBody
		if c := gw.Do(context.Background(), http.MethodPost, "/v1/responses", input("and now?", "previous_response_id", r.ID), nil); c.Status != http.StatusOK {
			t.Fatalf("continue the failed response: %d %s", c.Status, c.Body)
		} else {
			c.Decode(t, &next)
		}
		if next.Metadata["sessionId"] != sid || next.Metadata["agentName"] != "billing" || next.Status != "completed" {
			t.Errorf("continued: %s", next.raw)
		}
	})
}

// The usage of response.failed counts a failed sub-agent's model calls
// that answered, as a completed response's counts every call of the run.
func TestResponsesFailedStreamCountsTheSubagent(t *testing.T) {
	u := &fakeupstream.Usage{PromptTokens: 10, CompletionTokens: 5}
	fake := fakeupstream.New(t,
		fakeupstream.Reply{Text: "Asking.", ToolCalls: []fakeupstream.ToolCall{toolCall("a1", "ask_researcher", `{"task":"x"}`)}, Usage: u},
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("l1", "lookup_charges", `{}`)}, Usage: u},
		fakeupstream.Reply{Status: http.StatusBadRequest, Text: "refused"},
	)
	fake.SetStrict(true)
	gw := gwtest.Start(t, gatedResearchYAML("", ""), map[string]string{"FAKE_URL": fake.URL, "TOOLS_URL": newToolServer(t).URL})
	_, r := stream(t, gw, map[string]any{"model": "research", "input": "go", "store": false}, nil)
	if r.Status != "failed" || r.Usage.TotalTokens != 30 {
		t.Errorf("status %s, usage %+v: want the lead's and the researcher's calls, 15 each", r.Status, r.Usage)
	}
}
