package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
	"github.com/switchboard-ai/switchboard/internal/gwtest"
)

// A call behind `ask` inside a sub-agent (CONTRACT §6, §8: a sub-agent's
// calls pass the gate under its own rules): in a session the whole run
// pauses, the approval naming the sub-agent and its call; once decided the
// sub-agent goes on from where it stopped, and its caller gets its answer.

// gatedResearch is the research desk whose researcher has lookup_charges
// behind ask, on a store.
func gatedResearch(t *testing.T, storeURL string, replies ...fakeupstream.Reply) (*gwtest.Gateway, *fakeupstream.Server, *toolServer) {
	t.Helper()
	tools := newToolServer(t)
	fake := fakeupstream.New(t, replies...)
	fake.SetStrict(true)
	gw := gwtest.Start(t, gatedResearchYAML(storeURL, ""), map[string]string{"FAKE_URL": fake.URL, "TOOLS_URL": tools.URL})
	return gw, fake, tools
}

// gatedResearchYAML is gatedResearch's config; graphExtra goes in the
// research graph.
func gatedResearchYAML(storeURL, graphExtra string) string {
	yaml := strings.Replace(researchYAML, "    instructions: You are the researcher.\n", `    instructions: You are the researcher.
    tools: [lookup_charges]
    permissions:
      - {tool: lookup_charges, action: ask}
`, 1) + graphExtra + `tools:
  lookup_charges:
    description: Lists the user's recent charges
    parameters: {type: object, properties: {}}
    http: {url: "${TOOLS_URL}/charges", timeout: 2s}
`
	if storeURL != "" {
		yaml += "store: {url: \"" + storeURL + "\"}\n"
	}
	return yaml
}

// askResearcher are the replies that have the lead ask the researcher,
// who calls lookup_charges, then rest.
func askResearcher(rest ...fakeupstream.Reply) []fakeupstream.Reply {
	return append([]fakeupstream.Reply{
		{ToolCalls: []fakeupstream.ToolCall{toolCall("a1", "ask_researcher", `{"task":"find the charges"}`)}},
		{ToolCalls: []fakeupstream.ToolCall{toolCall("l1", "lookup_charges", `{}`)}},
	}, rest...)
}

// researchTurn is the research desk's request with no new message.
func researchTurn() map[string]any {
	return map[string]any{"model": "research", "messages": []any{}}
}

// Approved: the sub-agent resumes with its own transcript (its task, its
// call, now the call's result), answers, and the lead answers with it;
// the session keeps only the lead's call and its result.
func TestSubagentApprovalResumes(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		gw, fake, tools := gatedResearch(t, storeURL, askResearcher(
			fakeupstream.Reply{Text: "Two charges of 5 USD."},
			fakeupstream.Reply{Text: "The researcher found two charges."},
		)...)
		id := newSessionID(t)
		a := paused(t, gw, gwtest.User("research", "charges?"), session(id), "lookup_charges", `{}`)
		if a.Agent != "researcher" || a.ToolCallID != "l1" {
			t.Errorf("approval %+v, want the researcher's call l1", a)
		}
		if len(tools.got("/charges")) != 0 {
			t.Fatal("the tool ran before it was approved")
		}
		r, s := getSessionAs(t, gw, id, session(id))
		if len(s.PendingApprovals) != 1 || s.PendingApprovals[0].ID != a.ID {
			t.Fatalf("pending %+v", s.PendingApprovals)
		}
		if strings.Contains(string(r.Body), `"nest"`) {
			t.Errorf("the session shows the sub-agent's kept transcript: %s", r.Body)
		}
		if d := decideOne(gw, id, a.ID, session(id), map[string]any{"approve": true}); d.Status != http.StatusOK || strings.Contains(string(d.Body), `"nest"`) {
			t.Fatalf("%d %s", d.Status, d.Body)
		}
		if c := completion(t, gw, researchTurn(), session(id)); c.Text() != "The researcher found two charges." || c.Choices[0].FinishReason != "stop" {
			t.Fatalf("%q %s", c.Text(), c.Choices[0].FinishReason)
		}
		if n := len(tools.got("/charges")); n != 1 {
			t.Errorf("the tool ran %d times", n)
		}
		reqs := fake.Requests()
		if len(reqs) != 4 {
			t.Fatalf("%d model calls", len(reqs))
		}
		sub := reqs[2]
		if sub.Parsed.Model != "research-model" || len(sub.Parsed.Messages) != 4 || sub.Parsed.Messages[1].Role != "user" || sub.Parsed.Messages[2].Role != "assistant" {
			t.Fatalf("the resumed sub-agent's call %+v", sub.Parsed.Messages)
		}
		if got := toolResults(sub)["l1"]; !strings.Contains(got, "ch_1") {
			t.Errorf("the sub-agent read %q for its call", got)
		}
		if got := toolResults(reqs[3])["a1"]; got != "Two charges of 5 USD." {
			t.Errorf("the lead read %q for ask_researcher", got)
		}
		_, s = getSessionAs(t, gw, id, session(id))
		if len(s.PendingApprovals) != 0 || len(s.Transcript) != 4 {
			t.Errorf("session after: %d pending, transcript %v", len(s.PendingApprovals), s.Transcript)
		}
	})
}

// Rejected in the next request's body: the sub-agent reads the rejection
// as its call's result and answers without it.
func TestSubagentApprovalRejected(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		gw, fake, tools := gatedResearch(t, storeURL, askResearcher(
			fakeupstream.Reply{Text: "I may not look."},
			fakeupstream.Reply{Text: "The researcher may not look."},
		)...)
		id := newSessionID(t)
		a := paused(t, gw, gwtest.User("research", "charges?"), session(id), "lookup_charges", `{}`)
		body := researchTurn()
		body["approvals"] = []any{map[string]any{"id": a.ID, "approve": false, "reason": "not today"}}
		if c := completion(t, gw, body, session(id)); c.Text() != "The researcher may not look." {
			t.Fatalf("%q", c.Text())
		}
		got := toolResults(fake.Requests()[2])["l1"]
		if errorCode(t, got) != "rejected" || !strings.Contains(got, "not today") {
			t.Errorf("the sub-agent read %q", got)
		}
		if len(tools.got("/charges")) != 0 {
			t.Error("a rejected call ran")
		}
	})
}

// A new user message instead of the decision: the sub-agent does not go
// on, the lead's call reads the new-message rejection, the approval is
// rejected, and the run goes on with the new message.
func TestSubagentApprovalMovedOn(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		gw, fake, tools := gatedResearch(t, storeURL, askResearcher(
			fakeupstream.Reply{Text: "Hello again."},
		)...)
		id := newSessionID(t)
		paused(t, gw, gwtest.User("research", "charges?"), session(id), "lookup_charges", `{}`)
		if c := completion(t, gw, gwtest.User("research", "never mind, hello"), session(id)); c.Text() != "Hello again." {
			t.Fatalf("%q", c.Text())
		}
		last := fake.Requests()[2]
		if last.Parsed.Model != "lead-model" {
			t.Fatalf("the run went on with %s", last.Parsed.Model)
		}
		got := toolResults(last)["a1"]
		if errorCode(t, got) != "rejected" || !strings.Contains(got, "the user sent a new message instead") {
			t.Errorf("the lead read %q", got)
		}
		if len(tools.got("/charges")) != 0 {
			t.Error("the call ran")
		}
		_, s := getSessionAs(t, gw, id, session(id))
		if len(s.PendingApprovals) != 0 {
			t.Errorf("still pending: %+v", s.PendingApprovals)
		}
	})
}

// Without a session nobody could decide: the sub-agent's call is denied,
// the sub-agent answers without it, and the caller's run goes on.
func TestSubagentApprovalStatelessDenied(t *testing.T) {
	gw, fake, tools := gatedResearch(t, "",
		askResearcher(fakeupstream.Reply{Text: "I could not look."}, fakeupstream.Reply{Text: "The researcher could not look."})...)
	c := completion(t, gw, gwtest.User("research", "charges?"), nil)
	if c.Text() != "The researcher could not look." || c.Choices[0].FinishReason != "stop" {
		t.Fatalf("%q %s", c.Text(), c.Choices[0].FinishReason)
	}
	res := toolResults(fake.Requests()[2])["l1"]
	if errorCode(t, res) != "denied" || !strings.Contains(res, "approval requires a session") {
		t.Errorf("the sub-agent's result %q", res)
	}
	if len(tools.got("/charges")) != 0 {
		t.Error("the tool ran")
	}
}

// Two levels down: the lead asks the researcher, who asks the summarizer,
// whose call waits. Each sub-agent goes on from its own kept transcript.
func TestSubagentApprovalTwoLevels(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		tools := newToolServer(t)
		yaml := strings.Replace(researchYAML, "    instructions: You are the researcher.\n", `    instructions: You are the researcher.
    subagents:
      - {agent: summarizer, description: Summarises}
`, 1)
		yaml = strings.Replace(yaml, "    instructions: You summarise.\n", `    instructions: You summarise.
    tools: [lookup_charges]
    permissions:
      - {tool: lookup_charges, action: ask}
`, 1) + `tools:
  lookup_charges:
    description: Lists the user's recent charges
    parameters: {type: object, properties: {}}
    http: {url: "${TOOLS_URL}/charges", timeout: 2s}
store: {url: "` + storeURL + `"}
`
		fake := fakeupstream.New(t,
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "ask_researcher", `{"task":"find the charges"}`)}},
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "ask_summarizer", `{"task":"sum up the charges"}`)}},
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "lookup_charges", `{}`)}},
			fakeupstream.Reply{Text: "Two charges."},
			fakeupstream.Reply{Text: "The summary: two charges."},
			fakeupstream.Reply{Text: "You were charged twice."},
		)
		fake.SetStrict(true)
		gw := gwtest.Start(t, yaml, map[string]string{"FAKE_URL": fake.URL, "TOOLS_URL": tools.URL})
		id := newSessionID(t)
		// Every level's model gave its call the id c1: the approval is
		// the summarizer's, not the lead's call of the same id.
		a := paused(t, gw, gwtest.User("research", "charges?"), session(id), "lookup_charges", `{}`)
		if a.Agent != "summarizer" || a.ToolCallID != "c1" {
			t.Errorf("approval %+v", a)
		}
		if d := decideOne(gw, id, a.ID, session(id), map[string]any{"approve": true}); d.Status != http.StatusOK {
			t.Fatalf("%d %s", d.Status, d.Body)
		}
		if c := completion(t, gw, researchTurn(), session(id)); c.Text() != "You were charged twice." {
			t.Fatalf("%q", c.Text())
		}
		if n := len(tools.got("/charges")); n != 1 {
			t.Errorf("the tool ran %d times", n)
		}
		reqs := fake.Requests()
		if len(reqs) != 6 {
			t.Fatalf("%d model calls", len(reqs))
		}
		for i, want := range []string{"summary-model", "research-model", "lead-model"} {
			r := reqs[3+i]
			if r.Parsed.Model != want {
				t.Fatalf("call %d went to %s, want %s", 3+i, r.Parsed.Model, want)
			}
			if got := toolResults(r)["c1"]; got == "" || strings.Contains(got, "error") {
				t.Errorf("%s read %q for its call", want, got)
			}
		}
		if got := toolResults(reqs[4])["c1"]; got != "Two charges." {
			t.Errorf("the researcher read %q", got)
		}
	})
}

// On a stream: the pause is the approval chunk after the sub-agent's
// start; the resumed stream reports the sub-agent's work, then the lead's
// answer.
func TestSubagentApprovalStreamed(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		gw, _, tools := gatedResearch(t, storeURL, askResearcher(
			fakeupstream.Reply{StreamChunks: []string{"Two ", "charges."}},
			fakeupstream.Reply{StreamChunks: []string{"You were ", "charged twice."}},
		)...)
		id := newSessionID(t)
		body := gwtest.User("research", "charges?")
		body["stream"] = true
		var apr string
		var events []string
		for _, d := range gwtest.SSE(t, gw.Chat(body, session(id)).Body) {
			var c struct {
				Metadata map[string]any `json:"metadata"`
			}
			if d != "[DONE]" {
				if err := json.Unmarshal([]byte(d), &c); err != nil {
					t.Fatalf("chunk %s: %v", d, err)
				}
			}
			if ev, _ := c.Metadata["event"].(string); ev != "" {
				events = append(events, ev)
			}
		}
		_, s := getSessionAs(t, gw, id, session(id))
		if len(s.PendingApprovals) != 1 {
			t.Fatalf("pending %+v", s.PendingApprovals)
		}
		apr = s.PendingApprovals[0].ID
		if strings.Join(events, " ") != "subagent_start approval_required" {
			t.Errorf("events %v", events)
		}
		if d := decideOne(gw, id, apr, session(id), map[string]any{"approve": true}); d.Status != http.StatusOK {
			t.Fatalf("%d %s", d.Status, d.Body)
		}
		turn := researchTurn()
		turn["stream"] = true
		var text strings.Builder
		events = nil
		for _, c := range readStream(t, gw.Chat(turn, session(id))) {
			if ev := c.Metadata["event"]; ev != "" {
				events = append(events, ev+" "+c.Metadata["subagent"]+" "+c.Metadata["text"])
			}
			if len(c.Choices) > 0 && c.Choices[0].Delta.Content != nil {
				text.WriteString(*c.Choices[0].Delta.Content)
			}
		}
		want := "subagent_start researcher |subagent_delta researcher Two |subagent_delta researcher charges.|subagent_done researcher "
		if got := strings.Join(events, "|"); got != want {
			t.Errorf("events %q, want %q", got, want)
		}
		if text.String() != "You were charged twice." || len(tools.got("/charges")) != 1 {
			t.Errorf("text %q, tool ran %d times", text.String(), len(tools.got("/charges")))
		}
	})
}

// The pre_tool_call hook hears of a sub-agent's call with the session it
// runs in, and is not asked again when the approved call resumes.
func TestSubagentCallHookHasTheSession(t *testing.T) {
	h := newHookServer(t, func(hookCall) (int, string) { return http.StatusOK, `{"action": "allow"}` })
	fake := fakeupstream.New(t, askResearcher(fakeupstream.Reply{Text: "Two charges."}, fakeupstream.Reply{Text: "You were charged twice."})...)
	fake.SetStrict(true)
	tools := newToolServer(t)
	yaml := gatedResearchYAML("memory://", "    pre_tool_call: {url: \""+h.URL+"/gate\"}\n")
	gw := gwtest.Start(t, yaml, map[string]string{"FAKE_URL": fake.URL, "TOOLS_URL": tools.URL})
	id := newSessionID(t)
	a := paused(t, gw, gwtest.User("research", "charges?"), session(id), "lookup_charges", `{}`)
	if d := decideOne(gw, id, a.ID, session(id), map[string]any{"approve": true}); d.Status != http.StatusOK {
		t.Fatalf("%d %s", d.Status, d.Body)
	}
	if c := completion(t, gw, researchTurn(), session(id)); c.Text() != "You were charged twice." {
		t.Fatalf("%q", c.Text())
	}
	var got []string
	for _, c := range h.calls() {
		got = append(got, c.Agent+" "+c.Tool+" "+c.SessionID)
	}
	want := []string{"lead ask_researcher " + id, "researcher lookup_charges " + id}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("hook calls %q, want %q", got, want)
	}
}

// The lead's ask_researcher call was approved, then the user sent a new
// message: the approved call runs first, and when the researcher then
// asks about a call of its own nobody is asked any more (the user moved
// on): that call reads the new-message rejection, the researcher answers
// without it, and the lead goes on with the new message.
func TestSubagentAsksAfterTheUserMovedOn(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		tools := newToolServer(t)
		fake := fakeupstream.New(t,
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("a1", "ask_researcher", `{"task":"find the charges"}`)}},
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("l1", "lookup_charges", `{}`)}},
			fakeupstream.Reply{Text: "I could not look."},
			fakeupstream.Reply{Text: "Hello again."},
		)
		fake.SetStrict(true)
		yaml := gatedResearchYAML(storeURL, "    permissions:\n      - {tool: ask_researcher, action: ask}\n")
		gw := gwtest.Start(t, yaml, map[string]string{"FAKE_URL": fake.URL, "TOOLS_URL": tools.URL})
		id := newSessionID(t)
		a := paused(t, gw, gwtest.User("research", "charges?"), session(id), "ask_researcher", `{"task":"find the charges"}`)
		if d := decideOne(gw, id, a.ID, session(id), map[string]any{"approve": true}); d.Status != http.StatusOK {
			t.Fatalf("%d %s", d.Status, d.Body)
		}
		if c := completion(t, gw, gwtest.User("research", "also, hello"), session(id)); c.Text() != "Hello again." {
			t.Fatalf("%q", c.Text())
		}
		reqs := fake.Requests()
		if got := toolResults(reqs[2])["l1"]; errorCode(t, got) != "rejected" || !strings.Contains(got, "the user sent a new message instead") {
			t.Errorf("the researcher read %q", got)
		}
		lead := reqs[3].Parsed.Messages
		if got := toolResults(reqs[3])["a1"]; got != "I could not look." || lead[len(lead)-1].Text() != "also, hello" {
			t.Errorf("the lead read %q for a1, then %q", got, lead[len(lead)-1].Text())
		}
		if len(tools.got("/charges")) != 0 {
			t.Error("the call ran")
		}
		if _, s := getSessionAs(t, gw, id, session(id)); len(s.PendingApprovals) != 0 {
			t.Errorf("pending %+v", s.PendingApprovals)
		}
		if r := gw.Chat(researchTurn(), session(id)); r.Status != http.StatusBadRequest {
			t.Errorf("an empty request with nothing paused: %d %s", r.Status, r.Body)
		}
	})
}

// Sub-agents of one turn that resume together read and change the
// session's approvals at once (run under -race).
func TestSubagentsResumeTogether(t *testing.T) {
	const n = 4
	stores(t, func(t *testing.T, storeURL string) {
		for range 3 {
			var calls []fakeupstream.ToolCall
			replies := []fakeupstream.Reply{{}}
			for i := range n {
				calls = append(calls, toolCall(fmt.Sprintf("a%d", i), "ask_researcher", `{"task":"find the charges"}`))
				replies = append(replies, fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("l1", "lookup_charges", `{}`)}})
			}
			replies[0].ToolCalls = calls
			for range n {
				replies = append(replies, fakeupstream.Reply{Text: "Found."})
			}
			replies = append(replies, fakeupstream.Reply{Text: "All found."})
			tools := newToolServer(t)
			fake := fakeupstream.New(t, replies...)
			yaml := strings.Replace(gatedResearchYAML(storeURL, ""), "max_steps: 6", "max_steps: 20", 1)
			gw := gwtest.Start(t, yaml, map[string]string{"FAKE_URL": fake.URL, "TOOLS_URL": tools.URL})
			id := newSessionID(t)
			r := gw.Chat(gwtest.User("research", "charges?"), session(id))
			var p pausedReply
			if r.Decode(t, &p); len(p.Metadata.Approvals) != n {
				t.Fatalf("%d approvals: %s", len(p.Metadata.Approvals), r.Body)
			}
			var ds []any
			for _, a := range p.Metadata.Approvals {
				ds = append(ds, map[string]any{"id": a.ID, "approve": true})
			}
			body := researchTurn()
			body["approvals"] = ds
			if c := completion(t, gw, body, session(id)); c.Text() != "All found." {
				t.Fatalf("%q", c.Text())
			}
			if got := len(tools.got("/charges")); got != n {
				t.Errorf("the tool ran %d times", got)
			}
		}
	})
}

// A new user message drops the sub-agent's approvals at once: the lead's
// own call of the same id (a waiting handoff) is not taken for theirs. It
// reads the new-message rejection and does not happen, and only the
// sub-agent's call is counted.
func TestSubagentApprovalIDsApartFromTheLeads(t *testing.T) {
	for _, decided := range []bool{false, true} {
		t.Run(map[bool]string{false: "pending", true: "approved"}[decided], func(t *testing.T) {
			stores(t, func(t *testing.T, storeURL string) {
				gw, fake, tools := gatedResearch(t, storeURL,
					fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{
						toolCall("a1", "ask_researcher", `{"task":"find the charges"}`),
						toolCall("l1", "transfer_to_billing", `{}`),
					}},
					fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("l1", "lookup_charges", `{}`)}},
					fakeupstream.Reply{Text: "Hello again."},
				)
				id := newSessionID(t)
				a := paused(t, gw, gwtest.User("research", "charges?"), session(id), "lookup_charges", `{}`)
				if decided {
					if d := decideOne(gw, id, a.ID, session(id), map[string]any{"approve": true}); d.Status != http.StatusOK {
						t.Fatalf("%d %s", d.Status, d.Body)
					}
				}
				c := completion(t, gw, gwtest.User("research", "never mind, hello"), session(id))
				last := fake.Requests()[2]
				if c.Metadata.AgentName != "lead" || last.Parsed.Model != "lead-model" {
					t.Errorf("the run went on as %q (%s): the waiting handoff happened", c.Metadata.AgentName, last.Parsed.Model)
				}
				if got := toolResults(last)["l1"]; !strings.Contains(got, "the user sent a new message instead") {
					t.Errorf("the waiting handoff read %q", got)
				}
				if len(tools.got("/charges")) != 0 {
					t.Error("the dropped call ran")
				}
				metrics := string(gw.Do(context.Background(), http.MethodGet, "/metrics", nil, nil).Body)
				if strings.Contains(metrics, `tool="transfer_to_billing"`) {
					t.Errorf("the handoff was counted:\n%s", grepLines(metrics, "permission_decisions"))
				}
			})
		})
	}
}

// A new message that an input guardrail stops leaves a sub-agent's pending
// approval pending and counts nothing; the next message that passes
// rejects it, counted once.
func TestSubagentApprovalTrippedMessageRejectsNothing(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		fake := fakeupstream.New(t, askResearcher()...)
		yaml := gatedResearchYAML(storeURL, "    input_guardrails: [no_cards]\n") + noCards
		gw := gwtest.Start(t, yaml, map[string]string{"FAKE_URL": fake.URL, "TOOLS_URL": newToolServer(t).URL})
		id := newSessionID(t)
		a := paused(t, gw, gwtest.User("research", "charges?"), session(id), "lookup_charges", `{}`)
		tripThenMoveOn(t, gw, fake, "research", session(id), a.ID)
	})
}
