package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/internal/freshstack"
)

// callKind tells how the run treats one tool call of a model turn.
type callKind int

const (
	callUnknown  callKind = iota // a name the agent was not offered
	callServer                   // a server-side tool of the agent
	callHandoff                  // an enabled handoff
	callDisabled                 // a handoff that enabled_when disables
	callClient                   // a tool of the request
	callCapped                   // past the graph's max_tool_calls_per_turn
)

// Tool error codes (docs/handoffs.md), also the outcomes of refused handoffs.
const (
	codeInvalidArgs   = "invalid_args"
	codeLimitExceeded = "limit_exceeded"
	codeExtraInTurn   = "extra_in_turn"
	codeDenied        = "denied"
	codeUnknownTool   = "unknown_tool"
	codeToolFailed    = "tool_failed"
	outcomeAccepted   = "accepted"
)

// turnOutcome is what a model turn's tool calls lead to.
type turnOutcome struct {
	// suspended is set when the run stops for calls someone outside must
	// answer; message and reason are then the run's reply.
	suspended *Suspension
	message   Message
	reason    string
	// handoff is the accepted handoff of the turn, already written to the
	// transcript; the run switches to its target.
	handoff *graphs.Handoff
}

// classified is one tool call with what it refers to.
type classified struct {
	kind   callKind
	inv    ToolInvocation
	result ToolResult
	ran    bool // result is set
}

// turn runs the tool calls of one model turn (docs/handoffs.md): server
// tools run, the first handoff call is considered and every other one
// refused, results are appended in the model's order, the accepted
// handoff's result last. Every server tool and handoff call passes the tool
// chain. When the turn calls client tools, or an interceptor holds a call,
// the run suspends for them, and the turn's handoff waits: resume takes it
// up again.
func (rn *run) turn(ctx context.Context, calls []ToolCall) (turnOutcome, error) {
	// A handoff's call runs under turn, and the stream of the agent it
	// hands to is read on the same goroutine: what needs a large frame
	// (sorting the calls, building the outcome) is in functions that are
	// not on the stack while a call runs (issue 22).
	cs, client, considered := rn.sortTurn(calls)
	// Refused calls, then server tools; the considered handoff last, and
	// only when no call of the turn is pending.
	for i := range cs {
		if c := &cs[i]; c.inv.Refusal != nil {
			if err := rn.invoke(ctx, c); err != nil {
				return turnOutcome{}, err
			}
		}
	}
	if err := rn.runServerTools(ctx, cs); err != nil {
		return turnOutcome{}, err
	}
	held := rn.heldCalls(cs)
	var accepted *classified
	if considered >= 0 && cs[considered].inv.Refusal == nil {
		c := &cs[considered]
		if client != nil || held != nil {
			// The handoff waits for the turn's other calls; when it needs
			// an approval too, it is asked for in the same pause.
			if p, ok := rn.askAhead(ctx, c); ok {
				held = append(held, p)
			}
			return rn.endTurn(ctx, cs, client, held, nil)
		}
		if err := rn.invoke(ctx, c); err != nil {
			return turnOutcome{}, err
		}
		switch {
		case c.result.Suspend != "":
			held = append(held, pendingOf(c.inv.Call, rn.agent.Name, c.result)...)
		case c.result.Code == "":
			accepted, c.ran = c, false // its result is written with the handoff
		}
	}
	return rn.endTurn(ctx, cs, client, held, accepted)
}

// askAhead gives a handoff that waits for its turn's other calls its own
// approval in the same pause, when the rules ask for one (CONTRACT §6:
// "Each pending call gets an approval"), so that an approver decides the
// whole turn at once, and the handoff's gate finds the decision when the
// turn resumes. A handoff asked about before, and still pending, is
// listed again. With a pre_tool_call hook the handoff is put to the hook
// when the turn resumes, as the hook may rewrite its arguments or decide
// from the turn's outcome (docs/permissions.md).
func (rn *run) askAhead(ctx context.Context, c *classified) (PendingCall, bool) {
	if rn.saver == nil || rn.req.Ephemeral || rn.graph.PreToolCall != nil {
		return PendingCall{}, false
	}
	call, agent := c.inv.Call, rn.agent.Name
	rn.apprMu.Lock()
	a := rn.approvalFor(call.ID)
	var prior Approval
	if a != nil {
		a.expire(time.Now())
		prior = *a
	}
	rn.apprMu.Unlock()
	if a != nil {
		if prior.Status != ApprovalPending {
			return PendingCall{}, false
		}
		return PendingCall{Call: call, Agent: agent, Reason: SuspendApproval, Data: prior.public()}, true
	}
	name := call.Function.Name
	if action, _ := decideRules(&rn.info, rn.agent, name); action != graphs.ActionAsk || rn.remembered(agent, name) {
		return PendingCall{}, false
	}
	res := rn.ask(&c.inv)
	rn.recordDecision(ctx, name, DecisionPending, SourceRule)
	return PendingCall{Call: call, Agent: agent, Reason: res.Suspend, Data: res.Data}, true
}

// sortTurn classifies a turn's calls: the client's, and the handoff
// considered (-1: none); the others get their refusal or result.
//
//go:noinline
func (rn *run) sortTurn(calls []ToolCall) (cs []classified, client []ToolCall, considered int) {
	cs = make([]classified, len(calls))
	for i, c := range calls {
		cs[i] = rn.classify(c)
		if i >= rn.maxToolCalls() {
			// A model that asks for thousands of calls in one turn gets the
			// first ones run; the others are refused, whatever they name.
			cs[i].kind = callCapped
		}
		if cs[i].kind == callClient {
			client = append(client, c)
		}
	}
	considered = -1
	for i := range cs {
		c := &cs[i]
		switch c.kind {
		case callUnknown:
			c.result, c.ran = ToolError(codeUnknownTool, fmt.Sprintf("agent %q has no tool or handoff named %q", rn.agent.Name, c.inv.Call.Function.Name)), true
		case callCapped:
			c.result, c.ran = ToolError(codeLimitExceeded, fmt.Sprintf("max_tool_calls_per_turn (%d) reached in this turn; this call was not run", rn.maxToolCalls())), true
		case callServer:
			if args := strings.TrimSpace(c.inv.Call.Function.Arguments); args != "" && !json.Valid([]byte(args)) {
				// Refused whatever a gate would decide: no person is asked
				// about, and no tool sent, arguments it cannot read.
				c.inv.Refusal = &ToolRefusal{codeInvalidArgs, "the arguments are not valid JSON"}
			}
		case callHandoff, callDisabled:
			switch {
			case considered >= 0:
				c.inv.Refusal = &ToolRefusal{codeExtraInTurn, "only one handoff per turn: " + strconv.Quote(cs[considered].inv.Call.Function.Name) + " came first"}
			case c.kind == callDisabled:
				considered = i
				c.inv.Refusal = &ToolRefusal{codeDenied, "this handoff is not enabled for this request"}
			default:
				considered = i
				// A handoff that cannot happen is refused before any gate:
				// no person is asked to approve it.
				c.inv.Refusal = rn.impossibleHandoff(&c.inv)
			}
		}
	}
	return cs, client, considered
}

// impossibleHandoff is the refusal of a handoff call whose arguments its
// schema refuses, or that max_handoffs leaves no room for (as
// considerHandoff would answer it); nil when it may happen.
func (rn *run) impossibleHandoff(inv *ToolInvocation) *ToolRefusal {
	var err error
	// Aside: decoding and validating go deep (considerHandoff). The
	// arguments read are kept for considerHandoff, unless a gate rewrites
	// them.
	freshstack.Run(func() {
		inv.args, err = parseArgs(inv.Handoff, inv.Call.Function.Arguments)
		inv.argsOf = inv.Call.Function.Arguments
	})
	switch {
	case err != nil:
		return &ToolRefusal{codeInvalidArgs, err.Error()}
	case rn.handoffs >= rn.graph.MaxHandoffs:
		return &ToolRefusal{codeLimitExceeded, fmt.Sprintf("max_handoffs (%d) reached in this run; answer the user yourself", rn.graph.MaxHandoffs)}
	}
	return nil
}

// heldCalls returns the calls of a turn that wait (an approval).
//
//go:noinline
func (rn *run) heldCalls(cs []classified) []PendingCall {
	var held []PendingCall
	for i := range cs {
		if r := cs[i].result; cs[i].ran && r.Suspend != "" {
			held = append(held, pendingOf(cs[i].inv.Call, rn.agent.Name, r)...)
		}
	}
	return held
}

// endTurn writes a turn's results and returns its outcome: suspended on
// client or held calls, else the accepted handoff, if any, taken.
//
//go:noinline
func (rn *run) endTurn(ctx context.Context, cs []classified, client []ToolCall, held []PendingCall, accepted *classified) (turnOutcome, error) {
	var out turnOutcome
	for i := range cs {
		if r := cs[i].result; cs[i].ran && r.Suspend == "" {
			rn.transcript = append(rn.transcript, toolResult(cs[i].inv.Call.ID, r.Content))
		}
	}
	if client != nil || held != nil {
		out.suspended = suspension(rn.agent, client, held)
		out.message = Message{Role: RoleAssistant}
		out.reason = "stop"
		if client != nil {
			out.message = rn.transcript[lastAssistant(rn.transcript)]
			out.message.ToolCalls = client
			out.reason = "tool_calls"
		}
		return out, nil
	}
	if accepted != nil {
		if err := rn.acceptHandoff(ctx, &accepted.inv); err != nil {
			return out, err
		}
		rn.forgetRemembered()
		out.handoff = accepted.inv.Handoff
	}
	return out, nil
}

// resume finishes a turn that suspended, once the request has brought what
// it waited for: the calls still without a result run now (through the
// chain again), and the turn's handoff, if any, is taken up.
func (rn *run) resume(ctx context.Context) (turnOutcome, error) {
	msgs := rn.transcript
	if lastAssistant(msgs) < 0 {
		// The turn that stopped is in the history: look from its last
		// assistant message on, copying only that much of it.
		if hi := lastAssistant(rn.history); hi >= 0 {
			msgs = append(slices.Clip(rn.history[hi:]), rn.transcript...)
		}
	}
	ai := lastAssistant(msgs)
	if ai < 0 || len(msgs[ai].ToolCalls) == 0 {
		return turnOutcome{}, nil
	}
	answered := make(map[string]bool)
	for _, m := range msgs[ai+1:] {
		switch {
		case m.IsSystem():
			// Context the client sent beside its results or decisions:
			// folded into the system prompt, it parts no call from its
			// result.
		case m.Role != RoleTool:
			return turnOutcome{}, nil // the user moved on; the open calls are dropped
		default:
			answered[m.ToolCallID] = true
		}
	}
	var rest, owed []ToolCall
	gated := false
	for _, c := range msgs[ai].ToolCalls {
		if answered[c.ID] {
			continue
		}
		if rn.classify(c).kind == callClient {
			owed = append(owed, c)
			continue
		}
		gated = gated || rn.gatedCall(c.ID)
		rest = append(rest, c)
	}
	if len(owed) > 0 && rn.held == nil {
		// (With a new user message held, the client has moved on from its
		// calls: only the approved ones run, then the message.)
		if !gated {
			return turnOutcome{}, nil // the client answered only some of its calls
		}
		// Decisions came before the client's results: the turn goes on
		// only once both are in, so the run waits for the results again.
		return rn.stillOwed(msgs[ai], owed, rest), nil
	}
	if len(rest) == 0 {
		return turnOutcome{}, nil
	}
	if held := rn.stillPending(rest); held != nil {
		// The turn resumes once every approval of it is decided (CONTRACT
		// §6): until then nothing of it runs, not even the calls already
		// approved, and the reply is the pause again.
		return turnOutcome{suspended: suspension(rn.agent, nil, held), message: Message{Role: RoleAssistant}, reason: "stop"}, nil
	}
	return rn.turn(ctx, rest)
}

// stillOwed is the suspension of a turn whose client calls are still owed
// while approvals held others: the tool_calls reply again, listing the
// approvals still pending.
func (rn *run) stillOwed(turn Message, owed, rest []ToolCall) turnOutcome {
	msg := turn
	msg.ToolCalls = owed
	return turnOutcome{suspended: suspension(rn.agent, owed, rn.stillPending(rest)), message: msg, reason: "tool_calls"}
}

// stillPending returns the approvals of a paused turn's calls that are
// still pending (none past approval_ttl), each as the call it holds, its
// own or one inside the sub-agent it asked.
func (rn *run) stillPending(rest []ToolCall) []PendingCall {
	var held []PendingCall
	now := time.Now()
	for _, c := range rest {
		rn.apprMu.Lock()
		a := rn.approvalFor(c.ID)
		var cp Approval
		if a != nil {
			cp = *a
		}
		rn.apprMu.Unlock()
		if a != nil {
			if cp.expire(now); cp.Status == ApprovalPending {
				held = append(held, PendingCall{Call: c, Agent: rn.agent.Name, Reason: SuspendApproval, Data: cp.public()})
			}
			continue
		}
		held = append(held, rn.nestedPending(c.ID)...)
	}
	return held
}

// classify tells what a call refers to for the current agent.
func (rn *run) classify(c ToolCall) classified {
	cl := classified{inv: ToolInvocation{Run: &rn.info, Agent: rn.agent, Call: c, Emit: rn.emitFromTool, rn: rn}}
	name := c.Function.Name
	if t := rn.serverTool(name); t != nil {
		cl.kind, cl.inv.Tool = callServer, t
		return cl
	}
	if t := rn.memoryTool(name); t != nil {
		cl.kind, cl.inv.Tool = callServer, t
		return cl
	}
	if h := agentHandoff(rn.agent, name); h != nil && !rn.noHandoffs {
		cl.inv.Handoff = h
		if h.EnabledWhen.Holds(rn.req.Metadata, rn.req.Principal) {
			cl.kind = callHandoff
		} else {
			cl.kind = callDisabled
		}
		return cl
	}
	for _, t := range rn.req.ClientTools {
		if t.Name == name {
			cl.kind = callClient
			return cl
		}
	}
	cl.kind = callUnknown
	return cl
}

// emitFromTool is a tool call's Emit: tools of a turn run concurrently.
func (rn *run) emitFromTool(ev Event) {
	rn.emitMu.Lock()
	defer rn.emitMu.Unlock()
	rn.emit(ev)
}

// serverTool returns the current agent's server tool of that name, or nil.
func (rn *run) serverTool(name string) *graphs.Tool {
	for _, t := range rn.agentTools() {
		if t.Name == name {
			return t
		}
	}
	return nil
}

func agentHandoff(a *graphs.Agent, name string) *graphs.Handoff {
	for _, h := range a.Handoffs {
		if h.ToolName == name {
			return h
		}
	}
	return nil
}

// invoke passes one call through the tool chain and records its result.
func (rn *run) invoke(ctx context.Context, c *classified) error {
	res, err := rn.chains.tool(ctx, &c.inv)
	if err != nil {
		return err
	}
	c.result, c.ran = res, true
	return nil
}

// runServerTools runs the turn's server tools, concurrently when there are
// several, and records each result on its call.
func (rn *run) runServerTools(ctx context.Context, cs []classified) error {
	// A refused call has been answered already (turn).
	runs := func(c *classified) bool { return c.kind == callServer && c.inv.Refusal == nil }
	n := 0
	for i := range cs {
		if runs(&cs[i]) {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	start := time.Now()
	defer func() { rn.external += time.Since(start) }()
	if n == 1 {
		for i := range cs {
			if runs(&cs[i]) {
				return rn.invoke(ctx, &cs[i])
			}
		}
	}
	// A turn's memory calls run first, one after another in the model's
	// order: a slot's facts are kept in the order they were remembered
	// (the oldest go first once it is full), and a recall reads what the
	// turn's remembers before it wrote.
	for i := range cs {
		if runs(&cs[i]) && cs[i].inv.Tool.Kind == graphs.ToolMemory {
			if err := rn.invoke(ctx, &cs[i]); err != nil {
				return err
			}
			n--
		}
	}
	// At most tool_concurrency of the others at once: a turn's calls share
	// one pool of goroutines, not one each.
	var wg sync.WaitGroup
	errs := make([]error, len(cs))
	next := make(chan int)
	for range min(n, rn.toolConcurrency()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				errs[i] = rn.invoke(ctx, &cs[i])
			}
		}()
	}
	for i := range cs {
		if runs(&cs[i]) && !cs[i].ran {
			next <- i
		}
	}
	close(next)
	wg.Wait()
	return errors.Join(errs...)
}

// maxToolCalls is the graph's max_tool_calls_per_turn (its default when a
// graph was built without it).
func (rn *run) maxToolCalls() int {
	if n := rn.graph.MaxToolCallsPerTurn; n > 0 {
		return n
	}
	return graphs.DefaultMaxToolCallsPerTurn
}

// toolConcurrency is the graph's tool_concurrency, or its default.
func (rn *run) toolConcurrency() int {
	if n := rn.graph.ToolConcurrency; n > 0 {
		return n
	}
	return graphs.DefaultToolConcurrency
}

// lastAssistant is the index of the transcript's last assistant message, or -1.
func lastAssistant(t []Message) int {
	for i := len(t) - 1; i >= 0; i-- {
		if t[i].Role == RoleAssistant {
			return i
		}
	}
	return -1
}

// toolResult is a tool message answering the call id.
func toolResult(id, content string) Message {
	return Message{Role: RoleTool, ToolCallID: id, Content: content}
}

// toolError is the JSON text of a refused call (docs/handoffs.md).
func toolError(code, message string) string {
	return `{"error": {"code": ` + strconv.Quote(code) + `, "message": ` + jsonString(message) + `}}`
}
