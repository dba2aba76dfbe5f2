package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
	"github.com/switchboard-ai/switchboard/internal/gwtest"
)

// researchYAML is a lead that asks a researcher (which has a handoff of its
// own, never offered to it as a sub-agent) and a summarizer with its own
// schema; the lead has model settings, the graph instructions.
const researchYAML = `
providers:
  fake:
    base_url: ${FAKE_URL}
    timeout: 5s
agents:
  lead:
    description: Answers the user
    instructions: You are the lead.
    model: fake/lead-model
    model_settings: {temperature: 0.2, max_tokens: 400, reasoning_effort: low, stop: END}
    subagents:
      - researcher
      - agent: summarizer
        tool_name: summarize
        description: Summarises a long text
        input_schema: {type: object, properties: {text: {type: string}}, required: [text]}
    handoffs: [billing]
  researcher:
    description: Finds facts
    instructions: You are the researcher.
    model: fake/research-model
    handoffs: [billing]
  summarizer:
    instructions: You summarise.
    model: fake/summary-model
  billing:
    description: Billing desk
    instructions: You are billing.
    model: fake/billing-model
graphs:
  research:
    lead: lead
    instructions: Always answer in English.
    max_steps: 6
`

func research(t *testing.T, extra string, replies ...fakeupstream.Reply) (*gwtest.Gateway, *fakeupstream.Server) {
	t.Helper()
	fake := fakeupstream.New(t, replies...)
	fake.SetStrict(true)
	gw := gwtest.Start(t, researchYAML+extra, map[string]string{"FAKE_URL": fake.URL})
	return gw, fake
}

// CONTRACT §8: the sub-agent runs a new transcript (its instructions and
// the graph's, then the task), without its handoffs; its answer is the
// lead's tool result; the session keeps only the call and its result.
func TestSubagentAsTool(t *testing.T) {
	gw, fake := research(t, "",
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "ask_researcher", `{"task":"find the boiling point of water"}`)}},
		fakeupstream.Reply{Text: "100 C at sea level"},
		fakeupstream.Reply{Text: "Water boils at 100 C."},
	)
	body := gwtest.User("research", "When does water boil?")
	body["temperature"], body["top_p"], body["seed"] = 0.9, 0.5, 7
	c := completion(t, gw, body, map[string]string{"X-Session-Id": "sub-agents-1"})
	if c.Text() != "Water boils at 100 C." || c.Metadata.AgentName != "lead" {
		t.Fatalf("reply: agent %q text %q", c.Metadata.AgentName, c.Text())
	}
	if c.Usage.TotalTokens != 45 {
		t.Errorf("usage %+v, want the 3 calls summed (45)", c.Usage)
	}
	reqs := fake.Requests()
	if len(reqs) != 3 {
		t.Fatalf("upstream got %d requests, want 3", len(reqs))
	}
	if diff := cmp.Diff([]string{"ask_researcher", "summarize", "transfer_to_billing"}, toolNames(reqs[0])); diff != "" {
		t.Errorf("lead tools (-want +got):\n%s", diff)
	}
	for _, tl := range reqs[0].Parsed.Tools {
		if tl.Function.Name == "ask_researcher" {
			if tl.Function.Description != "Finds facts" {
				t.Errorf("ask_researcher description %q", tl.Function.Description)
			}
			if got := string(tl.Function.Parameters); got != `{"type":"object","properties":{"task":{"type":"string"}},"required":["task"]}` {
				t.Errorf("ask_researcher parameters %s", got)
			}
		}
	}
	sub := reqs[1]
	if sub.Parsed.Model != "research-model" {
		t.Fatalf("second call went to %q", sub.Parsed.Model)
	}
	var roles []string
	for _, m := range sub.Parsed.Messages {
		roles = append(roles, m.Role+": "+m.Text())
	}
	want := []string{"system: You are the researcher.\n\nAlways answer in English.", "user: find the boiling point of water"}
	if diff := cmp.Diff(want, roles); diff != "" {
		t.Errorf("what the sub-agent was sent (-want +got):\n%s", diff)
	}
	if len(sub.Parsed.Tools) != 0 {
		t.Errorf("the sub-agent was offered %v; its handoffs must not be", toolNames(sub))
	}
	if got := systemPrompt(t, reqs[0]); got != "You are the lead.\n\nAlways answer in English." {
		t.Errorf("lead system prompt %q", got)
	}
	if got := toolResults(reqs[2])["c1"]; got != "100 C at sea level" {
		t.Errorf("the lead's tool result %q", got)
	}
	// model_settings win over the client's parameters; the client's fill
	// in the rest, and apply alone to an agent without settings.
	lead, researcher := params(t, reqs[0]), params(t, sub)
	for k, v := range map[string]any{"temperature": 0.2, "max_tokens": 400.0, "reasoning_effort": "low", "stop": "END", "top_p": 0.5, "seed": 7.0} {
		got := lead[k]
		if s, ok := got.([]any); ok && len(s) == 1 {
			got = s[0]
		}
		if got != v {
			t.Errorf("lead %s = %v, want %v", k, lead[k], v)
		}
	}
	if researcher["temperature"] != 0.9 || researcher["max_tokens"] != nil || researcher["reasoning_effort"] != nil {
		t.Errorf("researcher params %v, want the client's alone", researcher)
	}
	// The session: the lead's call and its result, never the sub-agent's task.
	resp := gw.Do(context.Background(), http.MethodGet, "/v1/sessions/sub-agents-1", nil, nil)
	var s struct {
		Transcript []struct {
			Role       string `json:"role"`
			Content    any    `json:"content"`
			ToolCallID string `json:"tool_call_id"`
		} `json:"transcript"`
	}
	resp.Decode(t, &s)
	var got []string
	for _, m := range s.Transcript {
		text, _ := m.Content.(string)
		got = append(got, m.Role+": "+text)
	}
	want = []string{"user: When does water boil?", "assistant: ", "tool: 100 C at sea level", "assistant: Water boils at 100 C."}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("session transcript (-want +got):\n%s", diff)
	}
	assertSystemFirst(t, fake)
}

// params decodes a recorded request's body.
func params(t *testing.T, r fakeupstream.Request) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// With its own input_schema, a sub-agent is sent the arguments as JSON;
// arguments that do not match it are invalid_args and run nothing.
func TestSubagentSchema(t *testing.T) {
	gw, fake := research(t, "",
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "summarize", `{"task":"no text"}`)}},
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c2", "summarize", `{"text":"a long text"}`)}},
		fakeupstream.Reply{Text: "short"},
		fakeupstream.Reply{Text: "done"},
	)
	c := completion(t, gw, gwtest.User("research", "summarise"), nil)
	if c.Text() != "done" {
		t.Fatalf("reply %q", c.Text())
	}
	reqs := fake.Requests()
	if got := errorCode(t, toolResults(reqs[1])["c1"]); got != "invalid_args" {
		t.Errorf("bad arguments: %s", toolResults(reqs[1])["c1"])
	}
	if reqs[2].Parsed.Model != "summary-model" || reqs[2].Parsed.Messages[1].Text() != `{"text":"a long text"}` {
		t.Errorf("summarizer got %s", reqs[2].Body)
	}
	if got := toolResults(reqs[3])["c2"]; got != "short" {
		t.Errorf("tool result %q", got)
	}
}

// On a stream the sub-agent's work is reported in metadata chunks with an
// empty delta; its text is never delta.content.
func TestSubagentStream(t *testing.T) {
	gw, _ := research(t, "",
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "ask_researcher", `{"task":"find it"}`)}},
		fakeupstream.Reply{StreamChunks: []string{"100 C ", "at sea level"}},
		fakeupstream.Reply{StreamChunks: []string{"Water boils ", "at 100 C."}},
	)
	body := gwtest.User("research", "When does water boil?")
	body["stream"] = true
	resp := gw.Chat(body, nil)
	if resp.Status != http.StatusOK {
		t.Fatalf("status %d: %s", resp.Status, resp.Body)
	}
	var content strings.Builder
	var events []string
	for _, d := range gwtest.SSE(t, resp.Body) {
		if d == "[DONE]" {
			continue
		}
		var ch struct {
			Choices []struct {
				Delta struct {
					Content *string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Metadata map[string]string `json:"metadata"`
		}
		if err := json.Unmarshal([]byte(d), &ch); err != nil {
			t.Fatalf("chunk %s: %v", d, err)
		}
		if len(ch.Choices) > 0 && ch.Choices[0].Delta.Content != nil {
			content.WriteString(*ch.Choices[0].Delta.Content)
		}
		m := ch.Metadata
		if ev := m["event"]; strings.HasPrefix(ev, "subagent_") {
			if len(ch.Choices) > 0 && ch.Choices[0].Delta.Content != nil {
				t.Errorf("a sub-agent chunk has content: %s", d)
			}
			events = append(events, ev+" "+m["agentName"]+" "+m["subagent"]+" "+m["toolCallId"]+" "+m["text"])
		}
	}
	if got := content.String(); got != "Water boils at 100 C." {
		t.Errorf("delta.content %q, want the lead's answer alone", got)
	}
	want := []string{
		"subagent_start lead researcher c1 ",
		"subagent_delta lead researcher c1 100 C ",
		"subagent_delta lead researcher c1 at sea level",
		"subagent_done lead researcher c1 ",
	}
	if diff := cmp.Diff(want, events); diff != "" {
		t.Errorf("sub-agent chunks (-want +got):\n%s", diff)
	}
}

// max_tokens_per_run counts the sub-agent's calls too: once reached, the
// run that needs another call ends with 422 budget_exceeded, and the steps
// already finished stay saved.
func TestTokenBudget(t *testing.T) {
	gw, fake := research(t, "    max_tokens_per_run: 25\n",
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "ask_researcher", `{"task":"find it"}`)}},
		fakeupstream.Reply{Text: "found"},
		fakeupstream.Reply{Text: "never asked for"},
	)
	resp := gw.Chat(gwtest.User("research", "go"), map[string]string{"X-Session-Id": "sub-agents-budget"})
	if resp.Status != http.StatusUnprocessableEntity || resp.ErrorCode(t) != "budget_exceeded" {
		t.Fatalf("status %d: %s", resp.Status, resp.Body)
	}
	if n := len(fake.Requests()); n != 2 {
		t.Errorf("upstream got %d calls, want 2 (30 tokens reached the budget of 25)", n)
	}
	sess := gw.Do(context.Background(), http.MethodGet, "/v1/sessions/sub-agents-budget", nil, nil)
	var s struct {
		Transcript []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"transcript"`
	}
	sess.Decode(t, &s)
	if len(s.Transcript) != 3 || s.Transcript[2].Role != "tool" || s.Transcript[2].Content != "found" {
		t.Errorf("saved transcript %+v, want the user message, the call and its result", s.Transcript)
	}
}

// A sub-agent's model calls count against the run's max_steps.
func TestSubagentMaxSteps(t *testing.T) {
	gw, _ := research(t, "",
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "ask_researcher", `{"task":"a"}`)}},
		fakeupstream.Reply{Text: "1"},
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c2", "ask_researcher", `{"task":"b"}`)}},
		fakeupstream.Reply{Text: "2"},
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c3", "ask_researcher", `{"task":"c"}`)}},
		fakeupstream.Reply{Text: "3"},
		fakeupstream.Reply{Text: "never"},
	)
	resp := gw.Chat(gwtest.User("research", "go"), nil)
	if resp.Status != http.StatusUnprocessableEntity || resp.ErrorCode(t) != "max_steps_exceeded" {
		t.Fatalf("status %d: %s", resp.Status, resp.Body)
	}
}

// The Responses API shows the lead's answer alone: nothing of the
// sub-agent's text, streamed or not.
func TestSubagentResponses(t *testing.T) {
	const secret = "SUBAGENT-TEXT-9f2c"
	for _, streamed := range []bool{false, true} {
		gw, _ := research(t, "",
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "ask_researcher", `{"task":"find it"}`)}},
			fakeupstream.Reply{Text: secret},
			fakeupstream.Reply{Text: "The lead's answer."},
		)
		body := input("go", "model", "research", "stream", streamed)
		r := gw.Do(context.Background(), http.MethodPost, "/v1/responses", body, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("stream=%v: status %d: %s", streamed, r.Status, r.Body)
		}
		if !strings.Contains(string(r.Body), "The lead's answer.") || strings.Contains(string(r.Body), secret) {
			t.Errorf("stream=%v: the reply must carry the lead's answer and nothing of the sub-agent's:\n%s", streamed, r.Body)
		}
	}
}

// On a stream a sub-agent's text reaches the client (subagent_delta), so
// the output guardrails check it before it does: its chunks are held until
// the sub-agent answered and its text passed, then sent in order; a trip
// sends none of them and ends the run with content_filter.
func TestSubagentStreamPassesOutputGuardrails(t *testing.T) {
	extra := "    output_guardrails: [no_cards]\n" + noCards
	t.Run("tripped", func(t *testing.T) {
		gw, _ := research(t, extra,
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "ask_researcher", `{"task":"find the card"}`)}},
			fakeupstream.Reply{StreamChunks: []string{"card 4111 ", "1111 1111 1111"}},
		)
		text, finish, chunks, raw := streamChat(t, gw, gwtest.User("research", "my card?"))
		if strings.Contains(raw, "4111") || strings.Contains(raw, "subagent_") {
			t.Errorf("the sub-agent's work reached the client:\n%s", raw)
		}
		if finish != "content_filter" || text != "I can't share card numbers." {
			t.Errorf("finish %q, text %q", finish, text)
		}
		if g := chunks[len(chunks)-1].Metadata.Guardrail; g == nil || g.Name != "no_cards" || g.Stage != "output" {
			t.Errorf("metadata.guardrail %+v", g)
		}
	})
	t.Run("passed", func(t *testing.T) {
		gw, _ := research(t, extra,
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "ask_researcher", `{"task":"find it"}`)}},
			fakeupstream.Reply{StreamChunks: []string{"100 C ", "at sea level"}},
			fakeupstream.Reply{StreamChunks: []string{"Water boils ", "at 100 C."}},
		)
		body := gwtest.User("research", "When does water boil?")
		body["stream"] = true
		var events []string
		for _, d := range gwtest.SSE(t, gw.Chat(body, nil).Body) {
			var ch struct {
				Metadata map[string]any `json:"metadata"`
			}
			if d != "[DONE]" {
				_ = json.Unmarshal([]byte(d), &ch)
			}
			if ev, _ := ch.Metadata["event"].(string); strings.HasPrefix(ev, "subagent_") {
				text, _ := ch.Metadata["text"].(string)
				events = append(events, ev+" "+text)
			}
		}
		want := []string{"subagent_start ", "subagent_delta 100 C ", "subagent_delta at sea level", "subagent_done "}
		if diff := cmp.Diff(want, events); diff != "" {
			t.Errorf("sub-agent chunks (-want +got):\n%s", diff)
		}
	})
}

// A sub-agent's own output guardrails judge what it streams to the client,
// as the speaking agent's do (CONTRACT §7), also in a graph with no
// guardrails of its own; not streamed, its text reaches no client and
// its answer is the lead's tool result.
func TestSubagentOwnOutputGuardrails(t *testing.T) {
	yaml := strings.Replace(researchYAML, "    model: fake/research-model\n", "    model: fake/research-model\n    output_guardrails: [no_cards]\n", 1) + noCards
	for _, streamed := range []bool{true, false} {
		fake := fakeupstream.New(t,
			fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "ask_researcher", `{"task":"find the card"}`)}},
			fakeupstream.Reply{StreamChunks: []string{"card 4111 ", "1111 1111 1111"}},
			fakeupstream.Reply{Text: "I found it but will not say."},
		)
		fake.SetStrict(true)
		gw := gwtest.Start(t, yaml, map[string]string{"FAKE_URL": fake.URL})
		if !streamed {
			if c := completion(t, gw, gwtest.User("research", "my card?"), nil); c.Text() != "I found it but will not say." {
				t.Errorf("not streamed: %q", c.Text())
			}
			continue
		}
		text, finish, chunks, raw := streamChat(t, gw, gwtest.User("research", "my card?"))
		if strings.Contains(raw, "4111") || finish != "content_filter" || text != "I can't share card numbers." {
			t.Errorf("streamed: finish %q, text %q:\n%s", finish, text, raw)
		}
		if g := chunks[len(chunks)-1].Metadata.Guardrail; g == nil || g.Name != "no_cards" {
			t.Errorf("metadata.guardrail %+v", g)
		}
	}
}

// The output guardrails judge each model turn of a sub-agent as a text of
// its own, as they judge each of the lead's: a pattern is not matched
// across two turns (twelve digits, a tool call, then four more are no card
// number).
func TestSubagentTurnsJudgedApart(t *testing.T) {
	graphExtra := "    output_guardrails: [no_cards]\n" + noCards
	fake := fakeupstream.New(t,
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("a1", "ask_researcher", `{"task":"count"}`)}},
		fakeupstream.Reply{StreamChunks: []string{"1111 2222 3333"}, ToolCalls: []fakeupstream.ToolCall{toolCall("l1", "lookup_charges", `{}`)}},
		fakeupstream.Reply{StreamChunks: []string{"4444"}},
		fakeupstream.Reply{StreamChunks: []string{"Counted."}},
	)
	fake.SetStrict(true)
	gw := gwtest.Start(t, gatedResearchYAML("", graphExtra), map[string]string{"FAKE_URL": fake.URL, "TOOLS_URL": newToolServer(t).URL})
	text, finish, _, raw := streamChat(t, gw, gwtest.User("research", "count"))
	if finish != "stop" || text != "Counted." {
		t.Errorf("finish %q, text %q: two turns were judged as one text\n%s", finish, text, raw)
	}
}
