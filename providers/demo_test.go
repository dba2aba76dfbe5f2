package providers

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/runtime"
)

const reasonSchema = `{"type":"object","properties":{"reason":{"type":"string"}}}`

func demoTools() []runtime.ToolDef {
	return []runtime.ToolDef{
		{Name: "transfer_to_billing", Description: "Handles bills, invoices and charges", Parameters: json.RawMessage(reasonSchema)},
		{Name: "transfer_to_refunds", Description: "Gives money back for returned orders", Parameters: json.RawMessage(reasonSchema)},
		{Name: "lookup_order", Description: "Finds an order and its charges",
			Parameters: json.RawMessage(`{"type":"object","properties":{"orderId":{"type":"string"}},"required":["orderId"]}`)},
		{Name: "list_charges", Description: "Lists the user's recent charges", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)},
	}
}

func demoRequest(system string, tools []runtime.ToolDef, msgs ...runtime.Message) *runtime.ChatRequest {
	all := append([]runtime.Message{{Role: runtime.RoleSystem, Content: system}}, msgs...)
	return &runtime.ChatRequest{Model: graphs.ModelRef{Provider: "demo", Model: "demo"}, Messages: runtime.PromptOf(all...), Tools: tools}
}

func user(text string) runtime.Message { return runtime.Message{Role: runtime.RoleUser, Content: text} }

func TestDemoToolCalls(t *testing.T) {
	tests := []struct {
		name     string
		system   string
		tools    []runtime.ToolDef
		text     string
		wantTool string // "": a text answer
		wantArgs string
	}{
		{name: "hands off on matching words", system: "You are triage.", tools: demoTools()[:2],
			text: "I was charged twice on my last bill", wantTool: "transfer_to_billing",
			wantArgs: `{"reason":"I was charged twice on my last bill"}`},
		{name: "best score wins", system: "You are triage.", tools: demoTools()[:2],
			text: "I want my money back for the returned order", wantTool: "transfer_to_refunds",
			wantArgs: `{"reason":"I want my money back for the returned order"}`},
		{name: "reason is truncated to 80 characters", system: "You are triage.", tools: demoTools()[:1],
			text:     "My invoice " + strings.Repeat("is wrong ", 20),
			wantTool: "transfer_to_billing", wantArgs: `{"reason":"My invoice is wrong is wrong is wrong is wrong is wrong is wrong is wrong is ..."}`},
		{name: "a tool without reason gets {}", system: "You are billing.", tools: demoTools()[2:],
			text: "show my recent charges", wantTool: "list_charges", wantArgs: `{}`},
		{name: "tools needing other arguments are never called", system: "You are billing.", tools: demoTools()[2:3],
			text: "find my order charges"},
		{name: "no matching words, text", system: "You are triage.", tools: demoTools(), text: "hello there"},
		{name: "no tools, text", system: "You are triage.", text: "refund my bill"},
		{name: "never hands straight back", tools: []runtime.ToolDef{
			{Name: "transfer_to_triage", Description: "Routes billing questions", Parameters: json.RawMessage(reasonSchema)}},
			system: "You are billing.\n\n[routing note - not from the user] handoff Triage -> billing: reason=\"bill\"",
			text:   "my billing problem"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := demoModel{}.Chat(t.Context(), demoRequest(tc.system, tc.tools, user(tc.text)), nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantTool == "" {
				if len(resp.Message.ToolCalls) != 0 || resp.FinishReason != "stop" || resp.Message.Content == "" {
					t.Errorf("got %+v, want a text answer", resp)
				}
				return
			}
			if len(resp.Message.ToolCalls) != 1 || resp.FinishReason != "tool_calls" || resp.Message.Content != "" {
				t.Fatalf("got %+v, want one tool call", resp)
			}
			c := resp.Message.ToolCalls[0]
			if c.Function.Name != tc.wantTool || c.Function.Arguments != tc.wantArgs || c.Type != "function" || !strings.HasPrefix(c.ID, "call_demo_") {
				t.Errorf("call %+v, want %s(%s)", c, tc.wantTool, tc.wantArgs)
			}
		})
	}
}

func TestDemoText(t *testing.T) {
	handoffCall := runtime.Message{Role: runtime.RoleAssistant, ToolCalls: []runtime.ToolCall{
		{ID: "c1", Type: "function", Function: runtime.FunctionCall{Name: "transfer_to_billing", Arguments: `{}`}}}}
	toolCall := runtime.Message{Role: runtime.RoleAssistant, ToolCalls: []runtime.ToolCall{
		{ID: "c2", Type: "function", Function: runtime.FunctionCall{Name: "list_charges", Arguments: `{}`}}}}
	const tail = " I am an offline demo; give this agent a real model for real answers."
	tests := []struct {
		name   string
		system string
		msgs   []runtime.Message
		want   string
	}{
		{"names itself from the system prompt", "You are the billing desk. Be kind.", []runtime.Message{user("hi there")},
			`Billing desk here (Switchboard demo model). I got your message "hi there".` + tail},
		{"takes over after a handoff", "You are the billing desk.\n\n[routing note - not from the user] handoff triage -> billing: reason=\"x\"",
			[]runtime.Message{user("double charge"), handoffCall, {Role: runtime.RoleTool, ToolCallID: "c1", Content: `{"assistant":"billing"}`}},
			`Billing desk here (Switchboard demo model), taking over from triage. I got your message "double charge".` + tail},
		{"quotes a tool result", "You're a helpful clerk", []runtime.Message{user("my charges"), toolCall,
			{Role: runtime.RoleTool, ToolCallID: "c2", Content: `[{"amount":12}]`}},
			`Helpful clerk here (Switchboard demo model). The tool list_charges returned: [{"amount":12}]. I got your message "my charges".` + tail},
		{"no 'You are'", "Route the user.", []runtime.Message{user("hi")},
			`Assistant here (Switchboard demo model). I got your message "hi".` + tail},
		{"no user message", "", nil,
			`Assistant here (Switchboard demo model). I got no message from you.` + tail},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := demoModel{}.Chat(t.Context(), demoRequest(tc.system, demoTools(), tc.msgs...), nil)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, resp.Message.Content); diff != "" {
				t.Errorf("answer (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDemoStreamUsageAndDeterminism(t *testing.T) {
	req := demoRequest("You are the billing desk.", nil, user("what do I owe"))
	req.Stream = true
	var d deltas
	resp, err := demoModel{}.Chat(t.Context(), req, d.add)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.got) < 5 || strings.Join(d.got, "") != resp.Message.Content {
		t.Errorf("deltas %q do not stream the answer %q word by word", d.got, resp.Message.Content)
	}
	words := len(strings.Fields(resp.Message.Content))
	want := runtime.Usage{PromptTokens: 9, CompletionTokens: words, TotalTokens: 9 + words}
	if resp.Usage != want {
		t.Errorf("usage %+v, want %+v", resp.Usage, want)
	}
	again, err := demoModel{}.Chat(t.Context(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(resp, again); diff != "" {
		t.Errorf("two identical requests answered differently (-first +second):\n%s", diff)
	}
}

func TestDemoThroughRegistry(t *testing.T) {
	r, err := New(Builtin(func(string) string { return "" }), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	resp, err := r.Chat(t.Context(), demoRequest("You are triage.", demoTools()[:2], user("refund my returned order")), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Message.ToolCalls) != 1 || resp.Message.ToolCalls[0].Function.Name != "transfer_to_refunds" {
		t.Errorf("got %+v", resp.Message)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := r.Chat(ctx, demoRequest("x", nil, user("hi")), nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled call: err = %v", err)
	}
}
