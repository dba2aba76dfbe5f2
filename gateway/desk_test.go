package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
	"github.com/switchboard-ai/switchboard/internal/gwtest"
	"github.com/switchboard-ai/switchboard/internal/testenv"
)

func TestMain(m *testing.M) { testenv.VerifyNoLeaks(m) }

// deskYAML is the support desk of the seeds, on the fake upstream: triage
// routes to billing (with a charges tool), tech-support, refunds (behind
// escalate_refund with an orderId schema) and a premium desk that only pro
// customers reach.
const deskYAML = `
server:
  listen: 127.0.0.1:0
providers:
  fake:
    base_url: ${FAKE_URL}
    timeout: 5s
tools:
  lookup_charges:
    description: Lists the user's recent charges
    parameters: {type: object, properties: {}}
    http: {url: "${TOOLS_URL}/charges", timeout: 2s}
  broken_tool:
    description: Always fails
    http: {url: "${TOOLS_URL}/broken", timeout: 2s}
agents:
  triage:
    description: Routes the user to the right desk
    instructions: You are the triage desk.
    model: fake/triage-model
    handoffs:
      - billing
      - tech-support
      - agent: refunds
        tool_name: escalate_refund
        description: Hand off when the user asks for money back
        input_schema:
          type: object
          properties: {orderId: {type: string}, note: {type: string}}
          required: [orderId]
        input_filter: remove_tool_calls
      - agent: premium
        enabled_when: {metadata: {plan: pro}}
        on_handoff: {url: "${TOOLS_URL}/hook", timeout: 2s}
  billing:
    description: Answers questions about charges and invoices
    instructions: You are the billing desk.
    model: fake/billing-model
    tools: [lookup_charges, broken_tool]
    handoffs: [triage]
  tech-support:
    description: Solves technical problems
    instructions: You are tech support.
    model: fake/tech-model
  refunds:
    description: Handles refunds
    instructions: You are the refunds desk.
    model: fake/refunds-model
  premium:
    description: The premium desk
    instructions: You are the premium desk.
    model: fake/premium-model
graphs:
  support:
    lead: triage
    description: Customer support desk
    max_handoffs: 2
    max_steps: 6
`

// toolServer serves the desk's HTTP tools and records what they got.
type toolServer struct {
	*httptest.Server
	mu    sync.Mutex
	calls map[string][]string
}

func newToolServer(t *testing.T) *toolServer {
	ts := &toolServer{calls: map[string][]string{}}
	ts.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		ts.mu.Lock()
		ts.calls[r.URL.Path] = append(ts.calls[r.URL.Path], string(b))
		ts.mu.Unlock()
		switch r.URL.Path {
		case "/charges":
			_, _ = io.WriteString(w, `{"charges":[{"id":"ch_1","amount":4200},{"id":"ch_2","amount":4200}]}`)
		case "/hook":
			w.WriteHeader(http.StatusNoContent)
		default:
			http.Error(w, "boom", http.StatusInternalServerError)
		}
	}))
	t.Cleanup(ts.Close)
	return ts
}

func (ts *toolServer) got(path string) []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]string(nil), ts.calls[path]...)
}

// desk starts the desk on a fresh fake upstream scripted with replies.
func desk(t *testing.T, replies ...fakeupstream.Reply) (*gwtest.Gateway, *fakeupstream.Server, *toolServer) {
	t.Helper()
	fake := fakeupstream.New(t, replies...)
	// Strict: the fake refuses what local models' templates refuse (a late
	// system message, a tool result without its call, ...).
	fake.SetStrict(true)
	tools := newToolServer(t)
	gw := gwtest.Start(t, deskYAML, map[string]string{"FAKE_URL": fake.URL, "TOOLS_URL": tools.URL})
	return gw, fake, tools
}

func toolCall(id, name, args string) fakeupstream.ToolCall {
	return fakeupstream.ToolCall{ID: id, Name: name, Arguments: args}
}

// completion posts a request and decodes a 200 reply.
func completion(t *testing.T, gw *gwtest.Gateway, body any, header map[string]string) *gwtest.Completion {
	t.Helper()
	resp := gw.Chat(body, header)
	if resp.Status != http.StatusOK {
		t.Fatalf("status %d: %s", resp.Status, resp.Body)
	}
	var c gwtest.Completion
	resp.Decode(t, &c)
	if got := resp.Header.Get("X-Agent-Name"); got != c.Metadata.AgentName {
		t.Errorf("X-Agent-Name %q, metadata.agentName %q", got, c.Metadata.AgentName)
	}
	return &c
}

// toolNames lists the tools a recorded request offered.
func toolNames(r fakeupstream.Request) []string {
	var out []string
	for _, tl := range r.Parsed.Tools {
		out = append(out, tl.Function.Name)
	}
	return out
}

// systemPrompt is a recorded request's leading system message.
func systemPrompt(t *testing.T, r fakeupstream.Request) string {
	t.Helper()
	if len(r.Parsed.Messages) == 0 || r.Parsed.Messages[0].Role != "system" {
		t.Fatalf("request does not start with a system message: %s", r.Body)
	}
	return r.Parsed.Messages[0].Text()
}

// assertSystemFirst checks docs/handoffs.md on every request the upstream got:
// no system message after the first, no tool result without its call.
func assertSystemFirst(t *testing.T, fake *fakeupstream.Server) {
	t.Helper()
	for i, r := range fake.Requests() {
		calls := map[string]bool{}
		for j, m := range r.Parsed.Messages {
			if j > 0 && (m.Role == "system" || m.Role == "developer") {
				t.Errorf("request %d: %s message at position %d", i, m.Role, j)
			}
			for _, c := range m.ToolCalls {
				calls[c.ID] = true
			}
			if m.Role == "tool" && !calls[m.ToolCallID] {
				t.Errorf("request %d: tool result %s without its call", i, m.ToolCallID)
			}
		}
	}
}

// toolResults maps tool_call_id to content for a recorded request.
func toolResults(r fakeupstream.Request) map[string]string {
	out := map[string]string{}
	for _, m := range r.Parsed.Messages {
		if m.Role == "tool" {
			out[m.ToolCallID] = m.Text()
		}
	}
	return out
}

// errorCode decodes a tool error result's code.
func errorCode(t *testing.T, result string) string {
	t.Helper()
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(result), &e); err != nil {
		t.Fatalf("tool result %q is not JSON: %v", result, err)
	}
	return e.Error.Code
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
