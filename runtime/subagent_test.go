package runtime_test

import (
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/switchboard-ai/switchboard/cache"
	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/runtime"
)

// CONTRACT §8: a sub-agent's invoke_agent and chat spans are children of
// the caller's execute_tool ask_<name> span; and (§5) its invoke_agent span
// names the session, which its run belongs to.
func TestSubagentSpans(t *testing.T) {
	cfg, err := graphs.Parse([]byte(`
providers: {fake: {base_url: "http://127.0.0.1:1/v1"}}
agents:
  lead: {instructions: I lead., model: fake/lead, subagents: [researcher]}
  researcher: {description: Finds., instructions: I find., model: fake/research}
graphs: {g: {lead: lead}}
`), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	model := &scriptModel{replies: []runtime.Message{
		calls(call("c1", "ask_researcher", `{"task":"look"}`)),
		{Role: runtime.RoleAssistant, Content: "found"},
		{Role: runtime.RoleAssistant, Content: "the answer"},
	}}
	store := cache.NewMemory(cache.Options{})
	defer store.Close()
	r := runtime.New(runtime.Options{Model: model, TracerProvider: tp, Store: store,
		Tools: runtime.ToolKinds{graphs.ToolAgent: runtime.SubagentRunner{}}})
	res, err := r.Run(t.Context(), &runtime.Request{Graph: cfg.Graphs["g"], SessionID: "s-sub",
		Messages: []runtime.Message{{Role: runtime.RoleUser, Content: "hi"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Message.Content != "the answer" {
		t.Errorf("answer %q", res.Message.Content)
	}
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		byName[s.Name()] = s
	}
	tool, ok := byName["execute_tool ask_researcher"]
	if !ok {
		t.Fatalf("no execute_tool ask_researcher span among %v", byName)
	}
	if p := byName["invoke_agent lead"]; tool.Parent().SpanID() != p.SpanContext().SpanID() {
		t.Error("execute_tool ask_researcher is not a child of invoke_agent lead")
	}
	sub := byName["invoke_agent researcher"]
	if sub == nil || sub.Parent().SpanID() != tool.SpanContext().SpanID() {
		t.Fatal("invoke_agent researcher is not a child of execute_tool ask_researcher")
	}
	if chat := byName["chat research"]; chat == nil || chat.Parent().SpanID() != sub.SpanContext().SpanID() {
		t.Error("the researcher's chat span is not a child of its invoke_agent span")
	}
	for _, name := range []string{"invoke_agent lead", "invoke_agent researcher"} {
		var id string
		for _, kv := range byName[name].Attributes() {
			if kv.Key == "gen_ai.conversation.id" {
				id = kv.Value.AsString()
			}
		}
		if id != "s-sub" {
			t.Errorf("%s: gen_ai.conversation.id %q, want the session s-sub", name, id)
		}
	}
}
