package gateway_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
	"github.com/switchboard-ai/switchboard/internal/gwtest"
)

// A model guardrail's judge is a model call of the run (CONTRACT §3.1, §5,
// §8): its usage, its budget, its span. The desk and its helpers are
// guardrails_test.go's.

// judgedUpstream is an upstream whose judge-model passes every text,
// reporting usage (nil: the fake's default), and whose agents answer
// answer.
func judgedUpstream(t *testing.T, usage *fakeupstream.Usage, answer fakeupstream.Reply) *fakeupstream.Server {
	fake := fakeupstream.New(t)
	fake.SetFallback(func(r fakeupstream.Request) fakeupstream.Reply {
		if r.Parsed.Model == "judge-model" {
			return fakeupstream.Reply{Text: `{"tripwire": false}`, Usage: usage}
		}
		return answer
	})
	return fake
}

// A model judge's tokens count against max_tokens_per_run (CONTRACT §8):
// the triage call (15 tokens) and its input guardrail's judge (15) reach a
// budget of 25, so the model call the tool's result needs is refused with
// 422 budget_exceeded. The judge's call starts while the budget is not yet
// spent (TestSpentBudgetStartsNoJudge: once it is, no judge starts).
func TestModelJudgeTokensCountAgainstBudget(t *testing.T) {
	fake := fakeupstream.New(t)
	fake.SetFallback(func(r fakeupstream.Request) fakeupstream.Reply {
		switch {
		case r.Parsed.Model == "judge-model":
			return fakeupstream.Reply{Text: `{"tripwire": false}`}
		case len(r.Parsed.Messages) > 0 && r.Parsed.Messages[len(r.Parsed.Messages)-1].Role == "tool":
			return fakeupstream.Reply{Text: "never asked for"}
		}
		return fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "lookup_charges", `{}`)}}
	})
	gw, tools := guardDesk(t, guardLists{
		extra: "  budgeted: {lead: triage, input_guardrails: [jailbreak], max_tokens_per_run: 25}\n",
	}, fake, nil)
	resp := gw.Chat(gwtest.User("budgeted", "what did I pay?"), nil)
	if resp.Status != http.StatusUnprocessableEntity || resp.ErrorCode(t) != "budget_exceeded" {
		t.Fatalf("status %d: %s", resp.Status, resp.Body)
	}
	var models []string
	for _, r := range fake.Requests() {
		models = append(models, r.Parsed.Model)
	}
	slices.Sort(models)
	if !slices.Equal(models, []string{"judge-model", "triage-model"}) {
		t.Errorf("upstream calls %v, want the triage call and its judge only", models)
	}
	if n := len(tools.got("/charges")); n != 1 {
		t.Errorf("the tool ran %d times, want once", n)
	}
}

// Once the run's budget is spent, a judge's call does not start either:
// the run ends with 422 budget_exceeded (CONTRACT §8: "no model call
// starts"), not with a trip, and the judge model is never asked.
func TestSpentBudgetStartsNoJudge(t *testing.T) {
	fake := judgedUpstream(t, nil, fakeupstream.Reply{Text: "an answer", Usage: &fakeupstream.Usage{PromptTokens: 40, CompletionTokens: 5}})
	gw, _ := guardDesk(t, guardLists{
		extra: "  spent: {lead: triage, output_guardrails: [jailbreak], max_tokens_per_run: 40}\n",
	}, fake, nil)
	resp := gw.Chat(gwtest.User("spent", "hello"), nil)
	if resp.Status != http.StatusUnprocessableEntity || resp.ErrorCode(t) != "budget_exceeded" {
		t.Fatalf("status %d: %s", resp.Status, resp.Body)
	}
	for _, r := range fake.Requests() {
		if r.Parsed.Model == "judge-model" {
			t.Errorf("the judge was asked after the budget was spent")
		}
	}
}

// A judge's call is one of the run's model calls: the reply's usage counts
// its tokens (CONTRACT §3.1: "sums every model call of the run"), streamed
// or not.
func TestUsageCountsTheJudge(t *testing.T) {
	fake := judgedUpstream(t, &fakeupstream.Usage{PromptTokens: 1000, CompletionTokens: 1},
		fakeupstream.Reply{Text: "an answer", Usage: &fakeupstream.Usage{PromptTokens: 100, CompletionTokens: 1}})
	gw, _ := guardDesk(t, guardLists{
		extra: "  judged: {lead: triage, input_guardrails: [jailbreak], output_guardrails: [jailbreak]}\n",
	}, fake, nil)
	r := guardChat(t, gw, gwtest.User("judged", "hello"), nil)
	if r.Usage.TotalTokens != 2103 {
		t.Errorf("usage %d tokens, want the answer's 101 and two judges' 1001 each", r.Usage.TotalTokens)
	}
	body := gwtest.User("judged", "hello")
	body["stream"], body["stream_options"] = true, map[string]any{"include_usage": true}
	_, _, chunks, _ := streamChat(t, gw, body)
	var total int
	for _, c := range chunks {
		if c.Usage != nil {
			total = c.Usage.TotalTokens
		}
	}
	if total != 2103 {
		t.Errorf("streamed usage %d tokens, want 2103", total)
	}
}

// A model judge's call is traced as the agents' calls are: a `chat` span
// (CONTRACT §5: one per provider call), under its guardrail's span.
func TestModelJudgeIsAChatSpan(t *testing.T) {
	fake := judgedUpstream(t, nil, fakeupstream.Reply{Text: "Fine."})
	coll, collURL := newCollector(t)
	gw, _ := guardDesk(t, guardLists{graphIn: "jailbreak", extra: "telemetry:\n  otlp_endpoint: " + collURL + "\n"}, fake, nil)
	if r := guardChat(t, gw, gwtest.User("support", "hello"), nil); r.Choices[0].FinishReason != "stop" {
		t.Fatalf("reply %+v", r)
	}
	gw.Close() // flush spans
	spans := string(coll.bytes())
	for _, want := range []string{"guardrail jailbreak", "chat judge-model", "chat triage-model"} {
		if !strings.Contains(spans, want) {
			t.Errorf("no %q in the exported spans", want)
		}
	}
}
