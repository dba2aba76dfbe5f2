package gateway_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
	"github.com/switchboard-ai/switchboard/internal/gwtest"
)

// Responses as points of sessions: continuing, forking, the session header,
// store:false, and the history a new session starts with.

// Create, continue from the latest response, and fork from an older one:
// the fork starts a new session from that point and the original session
// is left as it was.
func TestResponsesContinueAndFork(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		gw, fake := sessionDesk(t, storeURL,
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "transfer_to_billing", `{"reason":"double"}`)}},
			fakeupstream.Reply{Text: "Billing here."},
			fakeupstream.Reply{Text: "The invoice is on its way."},
			fakeupstream.Reply{Text: "Refund noted."},
		)
		r1 := create(t, gw, input("I was charged twice", "metadata", map[string]any{"plan": "basic"}), nil)
		if !strings.HasPrefix(r1.ID, "resp_") || r1.Object != "response" || r1.Status != "completed" || r1.Model != "support" {
			t.Fatalf("r1: %s", r1.raw)
		}
		sess := r1.Metadata["sessionId"]
		if r1.text() != "Billing here." || r1.Metadata["agentName"] != "billing" || sess == "" || r1.Metadata["plan"] != "basic" {
			t.Fatalf("r1: text %q metadata %v", r1.text(), r1.Metadata)
		}
		if r1.Usage.TotalTokens == 0 || r1.Usage.TotalTokens != r1.Usage.InputTokens+r1.Usage.OutputTokens {
			t.Errorf("r1 usage %+v", r1.Usage)
		}

		r2 := create(t, gw, input("and the invoice?", "previous_response_id", r1.ID), nil)
		if r2.Metadata["sessionId"] != sess || r2.Metadata["agentName"] != "billing" || *r2.PreviousResponseID != r1.ID {
			t.Fatalf("r2 did not continue the session: %v", r2.Metadata)
		}
		if got := fake.Requests()[2]; got.Parsed.Model != "billing-model" ||
			!cmp.Equal(upstreamTexts(got), []string{"user:I was charged twice", "assistant:Billing here.", "user:and the invoice?"}) {
			t.Fatalf("r2 upstream: %s %v", got.Parsed.Model, upstreamTexts(got))
		}
		_, before := getSession(t, gw, sess, nil)

		// r1 is no longer the latest point of its session: a fork.
		r3 := create(t, gw, input("actually, refund me", "previous_response_id", r1.ID), nil)
		forked := r3.Metadata["sessionId"]
		if forked == "" || forked == sess || r3.Metadata["agentName"] != "billing" {
			t.Fatalf("r3 did not fork: %v", r3.Metadata)
		}
		if got := fake.Requests()[3]; !cmp.Equal(upstreamTexts(got), []string{"user:I was charged twice", "assistant:Billing here.", "user:actually, refund me"}) {
			t.Fatalf("the fork saw %v", upstreamTexts(got))
		}
		_, after := getSession(t, gw, sess, nil)
		if after.Version != before.Version || len(after.Transcript) != len(before.Transcript) {
			t.Errorf("the fork changed the original session: version %d -> %d, %d -> %d messages",
				before.Version, after.Version, len(before.Transcript), len(after.Transcript))
		}
		if _, f := getSession(t, gw, forked, nil); f.ActiveAgent != "billing" || len(f.Transcript) != len(before.Transcript)-2+2 {
			t.Errorf("forked session: agent %q, %d messages", f.ActiveAgent, len(f.Transcript))
		}

		// r2 is still the latest point of the original session.
		fake.Push(fakeupstream.Reply{Text: "Anything else?"})
		r4 := create(t, gw, input("thanks", "previous_response_id", r2.ID), nil)
		if r4.Metadata["sessionId"] != sess {
			t.Errorf("continuing the latest response forked: %v", r4.Metadata)
		}
	})
}

// The session header, sent with previous_response_id, must name the
// response's session; alone, it names the session a new response goes on.
func TestResponsesSessionHeader(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		gw, fake := sessionDesk(t, storeURL, fakeupstream.Reply{Text: "one"}, fakeupstream.Reply{Text: "two"})
		id := newSessionID(t)
		r1 := create(t, gw, input("first"), session(id))
		if r1.Metadata["sessionId"] != id {
			t.Fatalf("the header's session was not used: %v", r1.Metadata)
		}
		bad := gw.Do(context.Background(), http.MethodPost, "/v1/responses", input("x", "previous_response_id", r1.ID), session(id+"-other"))
		if bad.Status != http.StatusBadRequest || bad.ErrorCode(t) != "invalid_request" {
			t.Fatalf("mismatched header: %d %s", bad.Status, bad.Body)
		}
		if n := len(fake.Requests()); n != 1 {
			t.Errorf("the upstream was called %d times", n)
		}
		r2 := create(t, gw, input("second", "previous_response_id", r1.ID), session(id))
		if r2.Metadata["sessionId"] != id || r2.text() != "two" {
			t.Errorf("matching header: %v %q", r2.Metadata, r2.text())
		}
	})
}

// store: false runs without a session and keeps nothing; with a previous
// response it sees that history and changes nothing of it.
func TestResponsesStoreFalse(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		gw, fake := sessionDesk(t, storeURL, fakeupstream.Reply{Text: "one"}, fakeupstream.Reply{Text: "two"}, fakeupstream.Reply{Text: "three"})
		r0 := create(t, gw, input("hello", "store", false), nil)
		if r0.Metadata["sessionId"] != "" || getResp(gw, r0.ID, nil).Status != http.StatusNotFound {
			t.Fatalf("store false kept something: %v", r0.Metadata)
		}
		if !strings.Contains(string(r0.raw), `"store":false`) {
			t.Errorf("store not echoed: %s", r0.raw)
		}
		r1 := create(t, gw, input("first"), nil)
		sess := r1.Metadata["sessionId"]
		_, before := getSession(t, gw, sess, nil)
		r2 := create(t, gw, input("what if", "store", false, "previous_response_id", r1.ID), nil)
		if r2.Metadata["sessionId"] != "" || r2.text() != "three" {
			t.Fatalf("unstored continuation: %v %q", r2.Metadata, r2.text())
		}
		if got := upstreamTexts(fake.Requests()[2]); !cmp.Equal(got, []string{"user:first", "assistant:two", "user:what if"}) {
			t.Errorf("the unstored continuation saw %v", got)
		}
		if _, after := getSession(t, gw, sess, nil); after.Version != before.Version {
			t.Errorf("the unstored continuation changed the session: %d -> %d", before.Version, after.Version)
		}
	})
}

// A fork from a point that an input filter has since rewritten out of the
// session's history is refused, never made from the rewritten history.
func TestResponsesForkAfterRewrite(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		gw, fake := sessionDesk(t, storeURL,
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("w1", "get_weather", `{"city":"Oslo"}`)}},
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("e1", "escalate_refund", `{"orderId":"o1"}`)}},
			fakeupstream.Reply{Text: "Refunds desk."},
		)
		r1 := create(t, gw, input("weather, then a refund", "tools", []any{respWeatherTool}), nil)
		next := map[string]any{"model": "support", "previous_response_id": r1.ID, "tools": []any{respWeatherTool},
			"input": []any{map[string]any{"type": "function_call_output", "call_id": "w1", "output": "sunny"}}}
		if r2 := create(t, gw, next, nil); r2.Metadata["agentName"] != "refunds" {
			t.Fatalf("r2: %v", r2.Metadata)
		}
		// remove_tool_calls dropped r1's call from the session's history.
		r := gw.Do(context.Background(), http.MethodPost, "/v1/responses", next, nil)
		if r.Status != http.StatusBadRequest || r.ErrorCode(t) != "invalid_request" || !strings.Contains(string(r.Body), "rewritten") {
			t.Fatalf("fork from a rewritten point: %d %s", r.Status, r.Body)
		}
		if n := len(fake.Requests()); n != 3 {
			t.Errorf("the upstream was called %d times, want 3", n)
		}
	})
}

// Two requests continuing the same response: one goes on in the session,
// the other forks, even while the first still holds the session.
func TestResponsesConcurrentContinuations(t *testing.T) {
	gw, fake := sessionDesk(t, "memory://", fakeupstream.Reply{Text: "one"})
	r1 := create(t, gw, input("first"), nil)
	fake.Push(fakeupstream.Reply{Text: "slow", Delay: 2 * time.Second}, fakeupstream.Reply{Text: "quick"})
	var first *respBody
	done := make(chan struct{})
	go func() {
		defer close(done) // also when create fails the test and ends this goroutine
		first = create(t, gw, input("second", "previous_response_id", r1.ID), nil)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := fake.WaitRequests(ctx, 2); err != nil {
		t.Fatalf("the first continuation did not reach the upstream: %v", err)
	}
	quick := create(t, gw, input("third", "previous_response_id", r1.ID), nil)
	<-done
	if first == nil {
		t.FailNow()
	}
	if first.Metadata["sessionId"] != r1.Metadata["sessionId"] || quick.Metadata["sessionId"] == r1.Metadata["sessionId"] || quick.text() != "quick" {
		t.Errorf("r1 %s, continuations %s (%q) and %s (%q)", r1.Metadata["sessionId"], first.Metadata["sessionId"], first.text(),
			quick.Metadata["sessionId"], quick.text())
	}
}

// A client that sends a whole conversation without previous_response_id (a
// stateless agent SDK replaying its items) has all of it kept: the
// provider sees it in order and the new session holds it.
func TestResponsesWholeHistory(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		gw, fake := sessionDesk(t, storeURL, fakeupstream.Reply{Text: "Sunny in Oslo."}, fakeupstream.Reply{Text: "You're welcome."})
		body := map[string]any{"model": "support", "tools": []any{respWeatherTool}, "input": []any{
			map[string]any{"role": "user", "content": "weather in Oslo?"},
			map[string]any{"type": "function_call", "id": "fc_1", "call_id": "w1", "name": "get_weather", "arguments": `{"city":"Oslo"}`, "status": "completed"},
			map[string]any{"type": "function_call_output", "call_id": "w1", "output": "sunny"},
		}}
		r := create(t, gw, body, nil)
		if r.text() != "Sunny in Oslo." {
			t.Fatalf("reply %q", r.text())
		}
		req := fake.Requests()[0]
		if !cmp.Equal(upstreamTexts(req), []string{"user:weather in Oslo?"}) || toolResults(req)["w1"] != "sunny" {
			t.Errorf("the provider saw %v, results %v", upstreamTexts(req), toolResults(req))
		}
		if _, s := getSession(t, gw, r.Metadata["sessionId"], nil); len(s.Transcript) != 4 {
			t.Errorf("the new session holds %d messages, want 4", len(s.Transcript))
		}
		r2 := create(t, gw, input("thanks", "previous_response_id", r.ID), nil)
		if got := upstreamTexts(fake.Requests()[1]); !cmp.Equal(got, []string{"user:weather in Oslo?", "assistant:Sunny in Oslo.", "user:thanks"}) || r2.Metadata["sessionId"] != r.Metadata["sessionId"] {
			t.Errorf("the next turn saw %v in %s", got, r2.Metadata["sessionId"])
		}
	})
}

// Stored responses are scoped per principal: another key cannot read,
// delete or continue them.
func TestResponsesIsolatedPerPrincipal(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		fake := fakeupstream.New(t, fakeupstream.Reply{Text: "for acme"})
		tools := newToolServer(t)
		yaml := strings.Replace(deskYAML, "server:\n  listen: 127.0.0.1:0\n", authYAML, 1) + "store: {url: \"" + storeURL + "\"}\n"
		gw := gwtest.Start(t, yaml, map[string]string{"FAKE_URL": fake.URL, "TOOLS_URL": tools.URL})
		acme := map[string]string{"Authorization": "Bearer key-acme"}
		globex := map[string]string{"Authorization": "Bearer key-globex"}
		r := create(t, gw, input("hello"), acme)
		for _, res := range []*gwtest.Response{
			getResp(gw, r.ID, globex),
			gw.Do(context.Background(), http.MethodDelete, "/v1/responses/"+r.ID, nil, globex),
			gw.Do(context.Background(), http.MethodPost, "/v1/responses", input("x", "previous_response_id", r.ID), globex),
		} {
			if res.Status != http.StatusNotFound || res.ErrorCode(t) != "response_not_found" {
				t.Errorf("globex reached acme's response: %d %s", res.Status, res.Body)
			}
		}
		if got := getResp(gw, r.ID, acme); got.Status != http.StatusOK {
			t.Errorf("acme lost its response: %d", got.Status)
		}
		if got := getResp(gw, r.ID, nil); got.Status != http.StatusUnauthorized {
			t.Errorf("no key: %d", got.Status)
		}
	})
}

// A fork from a response keeps the session's active agent as CONTRACT 4.1
// defines it, the last handoff marker's, also from a response a graph
// without that agent answered with its lead.
func TestForkKeepsTheMarkersAgent(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		fake := fakeupstream.New(t,
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "transfer_to_billing", `{}`)}},
			fakeupstream.Reply{Text: "billing: what charge?"},
			fakeupstream.Reply{Text: "greeter: hello"},
			fakeupstream.Reply{Text: "billing: again"},
			fakeupstream.Reply{Text: "billing: from the fork"},
		)
		gw := gwtest.Start(t, frontYAML()+"store: {url: \""+storeURL+"\"}\n", map[string]string{"FAKE_URL": fake.URL, "TOOLS_URL": newToolServer(t).URL})
		r1 := create(t, gw, map[string]any{"model": "support", "input": "charged twice"}, nil)
		r2 := create(t, gw, map[string]any{"model": "front", "input": "hi", "previous_response_id": r1.ID}, nil)
		create(t, gw, map[string]any{"model": "support", "input": "still there?", "previous_response_id": r2.ID}, nil)
		fork := create(t, gw, map[string]any{"model": "support", "input": "back to r2", "previous_response_id": r2.ID}, nil)
		if fork.Metadata["sessionId"] == r1.Metadata["sessionId"] || fork.Metadata["agentName"] != "billing" {
			t.Fatalf("the fork: %v", fork.Metadata)
		}
		if _, s := getSession(t, gw, fork.Metadata["sessionId"], nil); s.ActiveAgent != "billing" {
			t.Errorf("the fork's activeAgent %q, want billing", s.ActiveAgent)
		}
	})
}
