package runtime_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-ai/switchboard/cache"
	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/runtime"
)

// scriptModel answers each call with the next of its replies and records
// the tools and messages each call was given.
type scriptModel struct {
	mu      sync.Mutex
	replies []runtime.Message
	calls   []*runtime.ChatRequest
}

func (m *scriptModel) Chat(_ context.Context, req *runtime.ChatRequest, _ func(string)) (*runtime.ChatResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, req)
	if len(m.replies) == 0 {
		return &runtime.ChatResponse{Message: runtime.Message{Role: runtime.RoleAssistant, Content: "done"}, FinishReason: "stop"}, nil
	}
	msg := m.replies[0]
	m.replies = m.replies[1:]
	return &runtime.ChatResponse{Message: msg, FinishReason: "stop"}, nil
}

func calls(cs ...runtime.ToolCall) runtime.Message {
	return runtime.Message{Role: runtime.RoleAssistant, ToolCalls: cs}
}

func call(id, name, args string) runtime.ToolCall {
	return runtime.ToolCall{ID: id, Type: "function", Function: runtime.FunctionCall{Name: name, Arguments: args}}
}

// argsTools records the arguments each tool call ran with and echoes them.
type argsTools struct {
	mu  sync.Mutex
	ran map[string]string
}

func (a *argsTools) Run(_ context.Context, inv *runtime.ToolInvocation) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ran == nil {
		a.ran = map[string]string{}
	}
	a.ran[inv.Call.ID] = inv.Call.Function.Arguments
	return "ran " + inv.Call.Function.Arguments, nil
}

// gate is a permission gate as an interceptor: it denies "deny", rewrites
// the arguments of "rewrite", and holds "ask" until approved is set.
type gate struct {
	runtime.BaseInterceptor
	mu       sync.Mutex
	approved bool
	seen     []string
}

func (g *gate) InterceptTool(next runtime.ToolFunc) runtime.ToolFunc {
	return func(ctx context.Context, inv *runtime.ToolInvocation) (runtime.ToolResult, error) {
		g.mu.Lock()
		g.seen = append(g.seen, inv.Call.Function.Name)
		approved := g.approved
		g.mu.Unlock()
		if inv.Refusal != nil {
			return next(ctx, inv)
		}
		switch inv.Call.Function.Name {
		case "deny":
			return runtime.ToolError("denied", "not for you"), nil
		case "rewrite":
			inv.Call.Function.Arguments = `{"q":"rewritten"}`
		case "ask":
			if !approved {
				return runtime.ToolResult{Suspend: "approval_required", Data: "apr_1"}, nil
			}
		}
		return next(ctx, inv)
	}
}

const gateConfig = `
providers: {fake: {base_url: "http://127.0.0.1:1/v1"}}
tools:
  deny: {http: {url: "http://127.0.0.1:1/t"}}
  rewrite: {http: {url: "http://127.0.0.1:1/t"}}
  ask: {http: {url: "http://127.0.0.1:1/t"}}
agents:
  triage: {description: Triage., instructions: I am triage., model: fake/m, tools: [deny, rewrite, ask], handoffs: [billing]}
  billing: {description: Billing., instructions: I am billing., model: fake/m}
graphs: {desk: {lead: triage}}
`

// TestToolInterceptorGates checks what a tool interceptor can do: deny a
// call with a tool error, rewrite its arguments, and suspend the run for
// it; the turn's handoff waits for the held call, and the session's next
// request runs it once the gate lets it through.
func TestToolInterceptorGates(t *testing.T) {
	cfg, err := graphs.Parse([]byte(gateConfig), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	store := cache.NewMemory(cache.Options{})
	defer store.Close()
	model := &scriptModel{replies: []runtime.Message{calls(
		call("c1", "deny", `{}`), call("c2", "rewrite", `{"q":"model"}`), call("c3", "ask", `{"q":"x"}`),
		call("c4", "transfer_to_billing", `{"reason":"money"}`),
	)}}
	tools := &argsTools{}
	g := &gate{}
	r := runtime.New(runtime.Options{Model: model, Store: store, Interceptors: []runtime.Interceptor{g},
		Tools: runtime.ToolKinds{graphs.ToolHTTP: tools}})
	req := &runtime.Request{Graph: cfg.Graphs["desk"], SessionID: "gated",
		Messages: []runtime.Message{{Role: runtime.RoleUser, Content: "hi"}}}
	res, err := r.Run(t.Context(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Suspension == nil || res.Suspension.Reason != "approval_required" || len(res.Suspension.Pending) != 1 ||
		res.Suspension.Pending[0].Call.ID != "c3" || res.Suspension.Pending[0].Data != "apr_1" {
		t.Fatalf("suspension = %+v, want c3 held for approval_required", res.Suspension)
	}
	if res.Agent != "triage" {
		t.Errorf("agent %s answered; the handoff must wait for the held call", res.Agent)
	}
	if diff := cmp.Diff(map[string]string{"c2": `{"q":"rewritten"}`}, tools.ran); diff != "" {
		t.Errorf("tools ran (-want +got):\n%s", diff)
	}
	sess, err := r.Session(t.Context(), runtime.SessionKey{ID: "gated"})
	if err != nil {
		t.Fatal(err)
	}
	results := map[string]string{}
	for _, m := range sess.Messages {
		if m.Role == runtime.RoleTool {
			results[m.ToolCallID] = m.Content
		}
	}
	if !strings.Contains(results["c1"], `"denied"`) || results["c2"] != `ran {"q":"rewritten"}` || results["c3"] != "" || results["c4"] != "" {
		t.Errorf("stored results %v: want c1 denied, c2 run, c3 and the handoff c4 pending", results)
	}

	// Approved: the next request of the session runs c3, then the handoff.
	g.mu.Lock()
	g.approved = true
	g.mu.Unlock()
	// A new user message would drop the open calls; a request that brings
	// no user message (here a system message: a tool result must answer a
	// call) resumes the turn (approvals resume with no new message at all).
	req.Messages = []runtime.Message{{Role: runtime.RoleSystem, Content: "Resume."}}
	res, err = r.Run(t.Context(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Agent != "billing" || tools.ran["c3"] != `{"q":"x"}` {
		t.Errorf("after approval: agent %s, tools ran %v; want c3 run and billing answering", res.Agent, tools.ran)
	}
}

// budget refuses every model call after the first, as a token budget does.
type budget struct {
	runtime.BaseInterceptor
	errOver error
}

type budgetKey struct{}

func (b *budget) InterceptRun(next runtime.RunFunc) runtime.RunFunc {
	return func(ctx context.Context, run *runtime.RunInfo) (*runtime.Result, error) {
		if run.Parent == nil {
			run.SetValue(budgetKey{}, new(int))
		}
		return next(ctx, run)
	}
}

func (b *budget) InterceptModel(next runtime.ModelFunc) runtime.ModelFunc {
	return func(ctx context.Context, call *runtime.ModelCall) (*runtime.ChatResponse, error) {
		n := call.Run.Value(budgetKey{}).(*int)
		if *n >= 1 {
			return nil, b.errOver
		}
		*n++
		return next(ctx, call)
	}
}

// TestModelInterceptorRefuses checks that a model interceptor can refuse a
// call before it starts, ending the run with its error.
func TestModelInterceptorRefuses(t *testing.T) {
	cfg, err := graphs.Parse([]byte(gateConfig), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	errOver := errors.New("budget exceeded")
	model := &scriptModel{replies: []runtime.Message{calls(call("c1", "deny", `{}`))}}
	r := runtime.New(runtime.Options{Model: model, Interceptors: []runtime.Interceptor{&budget{errOver: errOver}}})
	_, err = r.Run(t.Context(), &runtime.Request{Graph: cfg.Graphs["desk"],
		Messages: []runtime.Message{{Role: runtime.RoleUser, Content: "hi"}}}, nil)
	if !errors.Is(err, errOver) || len(model.calls) != 1 {
		t.Errorf("Run: %v after %d model calls, want the budget's error after 1", err, len(model.calls))
	}
}

// tripwire halts the run at its first model call, as a guardrail does.
type tripwire struct{ runtime.BaseInterceptor }

func (tripwire) InterceptModel(next runtime.ModelFunc) runtime.ModelFunc {
	return func(ctx context.Context, call *runtime.ModelCall) (*runtime.ChatResponse, error) {
		if _, err := next(ctx, call); err != nil {
			return nil, err
		}
		return nil, &runtime.Halt{FinishReason: "content_filter", Content: "I can't help with that request.",
			Metadata: map[string]any{"guardrail": "g"}}
	}
}

// TestHaltSavesNothing checks that a Halt ends the run with its own answer
// and saves nothing of the step in flight.
func TestHaltSavesNothing(t *testing.T) {
	cfg, err := graphs.Parse([]byte(gateConfig), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	store := cache.NewMemory(cache.Options{})
	defer store.Close()
	r := runtime.New(runtime.Options{Model: &scriptModel{}, Store: store, Interceptors: []runtime.Interceptor{tripwire{}}})
	res, err := r.Run(t.Context(), &runtime.Request{Graph: cfg.Graphs["desk"], SessionID: "halted",
		Messages: []runtime.Message{{Role: runtime.RoleUser, Content: "hi"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.FinishReason != "content_filter" || res.Message.Content != "I can't help with that request." || res.Halt == nil {
		t.Errorf("result %+v, want the halt's answer", res)
	}
	if _, err := r.Session(t.Context(), runtime.SessionKey{ID: "halted"}); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("session after a halt: %v, want none saved", err)
	}
	// The lock went back: the session takes a new turn at once.
	r2 := runtime.New(runtime.Options{Model: &scriptModel{}, Store: store})
	if _, err := r2.Run(t.Context(), &runtime.Request{Graph: cfg.Graphs["desk"], SessionID: "halted",
		Messages: []runtime.Message{{Role: runtime.RoleUser, Content: "hi"}}}, nil); err != nil {
		t.Errorf("next turn: %v", err)
	}
}

// subAgent is a tool runner that asks the billing agent, as a sub-agent
// tool does: a fresh transcript, its final text as the result.
type subAgent struct {
	r     *runtime.Runner
	graph *graphs.Graph
	mu    sync.Mutex
	info  *runtime.RunInfo
}

func (s *subAgent) Run(ctx context.Context, inv *runtime.ToolInvocation) (string, error) {
	res, err := s.r.RunAgent(ctx, &runtime.AgentRequest{Parent: inv.Run, Graph: s.graph, Agent: s.graph.Agents["billing"],
		Messages: []runtime.Message{{Role: runtime.RoleUser, Content: "the task"}}}, inv.Emit)
	if err != nil {
		return "", err
	}
	return res.Message.Content, nil
}

// runs records every run an interceptor sees.
type runs struct {
	runtime.BaseInterceptor
	mu    sync.Mutex
	depth []int
	steps []int
}

func (r *runs) InterceptRun(next runtime.RunFunc) runtime.RunFunc {
	return func(ctx context.Context, run *runtime.RunInfo) (*runtime.Result, error) {
		res, err := next(ctx, run)
		r.mu.Lock()
		r.depth, r.steps = append(r.depth, run.Depth()), append(r.steps, run.Steps())
		r.mu.Unlock()
		return res, err
	}
}

// TestRunAgent checks the loop apart from sessions: a tool runs an agent
// over a transcript of its own and gets its text; the sub-agent's run is
// seen by interceptors as a child, its model calls count in the request's
// steps, and it is offered no handoff.
func TestRunAgent(t *testing.T) {
	cfg, err := graphs.Parse([]byte(strings.Replace(gateConfig, "billing: {description: Billing., instructions: I am billing., model: fake/m}",
		"billing: {description: Billing., instructions: I am billing., model: fake/m, handoffs: [triage]}", 1)), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	model := &scriptModel{replies: []runtime.Message{
		calls(call("c1", "ask", `{}`)),
		{Role: runtime.RoleAssistant, Content: "billing says 42"},
		{Role: runtime.RoleAssistant, Content: "the answer is 42"},
	}}
	seen := &runs{}
	sub := &subAgent{graph: cfg.Graphs["desk"]}
	r := runtime.New(runtime.Options{Model: model, Interceptors: []runtime.Interceptor{seen}, Tools: runtime.ToolKinds{graphs.ToolHTTP: sub}})
	sub.r = r
	res, err := r.Run(t.Context(), &runtime.Request{Graph: cfg.Graphs["desk"],
		Messages: []runtime.Message{{Role: runtime.RoleUser, Content: "hi"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Message.Content != "the answer is 42" {
		t.Errorf("answer %q", res.Message.Content)
	}
	last := model.calls[2].Messages.Flat()
	if got := last[len(last)-1].Content; got != "billing says 42" {
		t.Errorf("the tool result is %q, want the sub-agent's text", got)
	}
	for _, tool := range model.calls[1].Tools {
		if strings.HasPrefix(tool.Name, "transfer_to_") {
			t.Errorf("the sub-agent was offered the handoff %s", tool.Name)
		}
	}
	if diff := cmp.Diff([]int{1, 0}, seen.depth); diff != "" {
		t.Errorf("run depths (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{2, 3}, seen.steps); diff != "" {
		t.Errorf("steps seen at each run's end (-want +got):\n%s", diff)
	}
}

// atEnd has a run save at its end only, as a guarded run does.
type atEnd struct{ runtime.BaseInterceptor }

func (atEnd) InterceptRun(next runtime.RunFunc) runtime.RunFunc {
	return func(ctx context.Context, ri *runtime.RunInfo) (*runtime.Result, error) {
		ri.SaveAtEnd()
		return next(ctx, ri)
	}
}

// A run saving at its end that fails keeps its finished steps, and the
// approvals as they stood after them: not one its failed step asked for,
// whose call is not stored. Here the failed step pauses for an approval
// beside a call whose large result makes the last save too large.
func TestFailedRunKeepsFinishedStepsOnly(t *testing.T) {
	cfg, err := graphs.Parse([]byte(strings.Replace(gateConfig, "graphs: {desk: {lead: triage}}",
		"graphs: {desk: {lead: triage, permissions: [{tool: ask, action: ask}]}}", 1)), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	store := cache.NewMemory(cache.Options{MaxSessionBytes: 2000})
	defer store.Close()
	model := &scriptModel{replies: []runtime.Message{
		calls(call("c1", "rewrite", `{"q":"small"}`)),
		calls(call("c2", "rewrite", `{"q":"`+strings.Repeat("x", 3000)+`"}`), call("c3", "ask", `{}`)),
	}}
	r := runtime.New(runtime.Options{Model: model, Store: store, Interceptors: []runtime.Interceptor{atEnd{}},
		Tools: runtime.ToolKinds{graphs.ToolHTTP: &argsTools{}}})
	req := &runtime.Request{Graph: cfg.Graphs["desk"], SessionID: "kept",
		Messages: []runtime.Message{{Role: runtime.RoleUser, Content: "hi"}}}
	if _, err := r.Run(t.Context(), req, nil); !errors.Is(err, runtime.ErrSessionTooLarge) {
		t.Fatalf("run: %v, want the last save too large", err)
	}
	sess, err := r.Session(t.Context(), runtime.SessionKey{ID: "kept"})
	if err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, m := range sess.Messages {
		roles = append(roles, m.Role)
	}
	if !slices.Equal(roles, []string{"user", "assistant", "tool"}) || len(sess.Approvals) != 0 {
		t.Errorf("stored %v and %d approvals, want the first step alone and none", roles, len(sess.Approvals))
	}
}
