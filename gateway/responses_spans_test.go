package gateway_test

import (
	"strings"
	"testing"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
	"github.com/switchboard-ai/switchboard/internal/gwtest"
	"github.com/switchboard-ai/switchboard/internal/syncbuf"
)

// A Responses run makes the same spans as a chat run: the HTTP server span
// of its route, invoke_agent per agent with the session as
// gen_ai.conversation.id, chat per provider call, the handoff; and, with
// capture_content off, no prompt or completion on them or in the logs.
func TestResponsesSpans(t *testing.T) {
	const userCanary, completionCanary = "CANARY-RESP-USER-5e1d", "CANARY-RESP-COMPLETION-77ab"
	fake := fakeupstream.New(t,
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "transfer_to_billing", `{}`)}},
		fakeupstream.Reply{Text: completionCanary},
	)
	tools := newToolServer(t)
	coll, collURL := newCollector(t)
	yaml := deskYAML + "telemetry:\n  otlp_endpoint: " + collURL + "\n"
	var logs syncbuf.Buffer
	gw := gwtest.StartLogging(t, gwtest.Compile(t, yaml, map[string]string{"FAKE_URL": fake.URL, "TOOLS_URL": tools.URL}), &logs)

	_, final := stream(t, gw, input(userCanary), nil)
	gw.Close() // flush spans
	spans := string(coll.bytes())
	for _, want := range []string{"POST /v1/responses", "invoke_agent triage", "invoke_agent billing", "chat triage-model",
		"chat billing-model", "handoff triage -> billing", final.Metadata["sessionId"]} {
		if !strings.Contains(spans, want) {
			t.Errorf("no %q in the exported spans", want)
		}
	}
	for _, content := range []string{userCanary, completionCanary} {
		if strings.Contains(spans, content) || strings.Contains(logs.String(), content) {
			t.Errorf("content %s leaked into spans or logs", content)
		}
	}
}
