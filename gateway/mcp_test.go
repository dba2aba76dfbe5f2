package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
	"github.com/switchboard-ai/switchboard/internal/gwtest"
	"github.com/switchboard-ai/switchboard/internal/syncbuf"
)

// mcpYAML is a two-desk support graph and a one-agent graph, behind keys.
const mcpYAML = `
server:
  api_keys:
    - {name: acme, key: acme-key}
    - {name: globex, key: globex-key}
providers:
  fake: {base_url: "${FAKE_URL}", timeout: 5s}
agents:
  triage:
    description: Routes the user to the right desk
    instructions: You are the triage desk.
    model: fake/triage-model
    handoffs: [billing]
  billing:
    description: Answers questions about charges and invoices
    instructions: You are the billing desk.
    model: fake/billing-model
  echo:
    instructions: Repeat.
    model: fake/echo-model
graphs:
  support: {lead: triage, description: Customer support desk}
  parrot: {lead: echo}
`

// mcpBearer sends a key with every request of an MCP client.
type mcpBearer struct {
	key  string
	base http.RoundTripper
}

func (b mcpBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.base.RoundTrip(r)
}

// mcpSession connects the Go SDK's client to the gateway's /mcp with key.
func mcpSession(t *testing.T, gw *gwtest.Gateway, key string) (*mcp.ClientSession, error) {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	transport := &mcp.StreamableClientTransport{
		Endpoint:   gw.URL + "/mcp",
		HTTPClient: &http.Client{Transport: mcpBearer{key: key, base: http.DefaultTransport}},
		MaxRetries: -1,
	}
	cs, err := client.Connect(context.Background(), transport, nil)
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

// listTools connects with key and lists the tools.
func listTools(t *testing.T, gw *gwtest.Gateway, key string) (*mcp.ClientSession, *mcp.ListToolsResult) {
	t.Helper()
	cs, err := mcpSession(t, gw, key)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return cs, res
}

func resultText(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func TestMCPListsGraphsAsTools(t *testing.T) {
	fake := fakeupstream.New(t)
	gw := gwtest.Start(t, mcpYAML, map[string]string{"FAKE_URL": fake.URL})
	if _, err := mcpSession(t, gw, "wrong-key"); err == nil {
		t.Fatal("connected to /mcp with a wrong key")
	}
	cs, res := listTools(t, gw, "acme-key")
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		schema, _ := json.Marshal(tool.InputSchema)
		var s struct {
			Properties map[string]struct {
				Type string `json:"type"`
			} `json:"properties"`
			Required []string `json:"required"`
		}
		if err := json.Unmarshal(schema, &s); err != nil {
			t.Fatal(err)
		}
		if s.Properties["message"].Type != "string" || s.Properties["session_id"].Type != "string" || !slices.Equal(s.Required, []string{"message"}) {
			t.Errorf("%s's input schema = %s, want message (required) and session_id, strings", tool.Name, schema)
		}
		if tool.Name == "support" && tool.Description != "Customer support desk" {
			t.Errorf("support's description = %q", tool.Description)
		}
	}
	if !slices.Equal(names, []string{"parrot", "support"}) {
		t.Errorf("tools = %v, want the graphs [parrot support]", names)
	}
	// A stateless server keeps no stream to send list_changed on: it
	// does not promise one.
	if caps := cs.InitializeResult().Capabilities; caps.Tools == nil || caps.Tools.ListChanged {
		t.Errorf("tools capability %+v, want tools without listChanged", caps.Tools)
	}
}

// Without API keys, a browser's request from another origin is 403 (MCP's
// transport: servers must validate Origin); a request without Origin, or
// from the gateway's own origin, is served. A body over max_body_bytes is
// 413 request_too_large, in the gateway's error shape, as on /v1.
func TestMCPOriginAndBodyLimit(t *testing.T) {
	fake := fakeupstream.New(t)
	yaml := strings.Replace(mcpYAML, `  api_keys:
    - {name: acme, key: acme-key}
    - {name: globex, key: globex-key}
`, "  max_body_bytes: 2000\n", 1)
	gw := gwtest.Start(t, yaml, map[string]string{"FAKE_URL": fake.URL})
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	post := func(body string, header map[string]string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, gw.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	code := func(resp *http.Response) string {
		var e struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&e)
		return e.Error.Code
	}
	if r := post(ping, map[string]string{"Origin": "http://evil.example"}); r.StatusCode != http.StatusForbidden || code(r) != "cross_origin_forbidden" {
		t.Errorf("another origin: %d", r.StatusCode)
	}
	if r := post(ping, nil); r.StatusCode != http.StatusOK {
		t.Errorf("no Origin: %d", r.StatusCode)
	}
	// The SDK's own check of the Host (DNS rebinding), in the same shape.
	req, _ := http.NewRequest(http.MethodPost, gw.URL+"/mcp", strings.NewReader(ping))
	req.Host = "rebound.example"
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	if r.StatusCode != http.StatusForbidden || code(r) != "cross_origin_forbidden" {
		t.Errorf("another Host: %d", r.StatusCode)
	}
	if r := post(ping, map[string]string{"Origin": gw.URL}); r.StatusCode != http.StatusOK {
		t.Errorf("the gateway's own origin: %d", r.StatusCode)
	}
	big := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"pad":"` + strings.Repeat("x", 2100) + `"}}}`
	if r := post(big, nil); r.StatusCode != http.StatusRequestEntityTooLarge || code(r) != "request_too_large" {
		t.Errorf("a body over the limit: %d", r.StatusCode)
	}
}

// TestMCPProtocolErrorsInTheGatewaysShape: what the SDK's handler refuses
// in plain text (a body that is no JSON-RPC message, a method it does not
// handle, a wrong Content-Type or Accept) is answered in the gateway's
// error shape, with the SDK's status and words; what it serves is left as
// it writes it.
func TestMCPProtocolErrorsInTheGatewaysShape(t *testing.T) {
	fake := fakeupstream.New(t)
	gw := gwtest.Start(t, mcpYAML, map[string]string{"FAKE_URL": fake.URL})
	post := func(body, contentType, accept string) (*http.Response, []byte) {
		req, _ := http.NewRequest(http.MethodPost, gw.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer acme-key")
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("Accept", accept)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, b
	}
	const both = "application/json, text/event-stream"
	for _, tc := range []struct {
		name, body, contentType, accept string
		status                          int
		words                           string
	}{
		{"not JSON", `{bad`, "application/json", both, http.StatusBadRequest, "malformed payload"},
		{"an empty batch", `[]`, "application/json", both, http.StatusBadRequest, "empty batch"},
		{"a method the server does not handle", `{"jsonrpc":"2.0","id":1,"method":"nope"}`, "application/json", both, http.StatusBadRequest, `"nope"`},
		{"a body that is not JSON", `{}`, "text/plain", both, http.StatusUnsupportedMediaType, "Content-Type"},
		{"no event streams accepted", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, "application/json", "application/json", http.StatusBadRequest, "text/event-stream"},
	} {
		resp, b := post(tc.body, tc.contentType, tc.accept)
		var e struct {
			Error struct {
				Message string  `json:"message"`
				Type    string  `json:"type"`
				Param   *string `json:"param"`
				Code    string  `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(b, &e); err != nil {
			t.Errorf("%s: %d %q is not the error shape: %v", tc.name, resp.StatusCode, b, err)
			continue
		}
		if resp.StatusCode != tc.status || e.Error.Type != "invalid_request_error" || e.Error.Code != "invalid_request" ||
			!strings.Contains(e.Error.Message, tc.words) || strings.HasSuffix(e.Error.Message, "\n") {
			t.Errorf("%s: %d %s", tc.name, resp.StatusCode, b)
		}
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Errorf("%s: Content-Type %q", tc.name, ct)
		}
	}
	resp, b := post(`{"jsonrpc":"2.0","id":7,"method":"ping"}`, "application/json", both)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") ||
		!strings.Contains(string(b), `"id":7`) {
		t.Errorf("a ping: %d %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
}

// callSupport calls the support graph's tool with args, which must succeed,
// and returns its text and its structured content.
func callSupport(t *testing.T, cs *mcp.ClientSession, args map[string]any) (string, map[string]any) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "support", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError {
		t.Fatalf("support(%v) failed: %s", args, resultText(t, res))
	}
	js, _ := json.Marshal(res.StructuredContent)
	var meta map[string]any
	_ = json.Unmarshal(js, &meta)
	return resultText(t, res), meta
}

func TestMCPCallRunsTheGraphInASession(t *testing.T) {
	fake := fakeupstream.New(t,
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("call_1", "transfer_to_billing", `{"reason":"invoice"}`)}},
		fakeupstream.Reply{Text: "Your invoice INV-7 is paid."},
		fakeupstream.Reply{Text: "It was paid on May 2."},
	)
	gw := gwtest.Start(t, mcpYAML, map[string]string{"FAKE_URL": fake.URL})
	cs, err := mcpSession(t, gw, "acme-key")
	if err != nil {
		t.Fatal(err)
	}
	call := func(args map[string]any) (string, map[string]any) { return callSupport(t, cs, args) }
	got, meta := call(map[string]any{"message": "Is my invoice paid?", "session_id": "mcp-sess-1"})
	if got != "Your invoice INV-7 is paid." {
		t.Errorf("text = %q", got)
	}
	if meta["agentName"] != "billing" || meta["sessionId"] != "mcp-sess-1" {
		t.Errorf("structured content = %v, want agentName billing, sessionId mcp-sess-1", meta)
	}
	// The session goes on at billing, for the same key.
	got, meta = call(map[string]any{"message": "When?", "session_id": "mcp-sess-1"})
	if got != "It was paid on May 2." || meta["agentName"] != "billing" {
		t.Errorf("second turn = %q by %v", got, meta["agentName"])
	}
	reqs := fake.Requests()
	if got := reqs[2].Parsed.Model; got != "billing-model" {
		t.Errorf("the second turn ran on %s, want billing-model", got)
	}
	if n := len(reqs[2].Parsed.Messages); n < 5 {
		t.Errorf("the second turn's prompt has %d messages, want the session's history", n)
	}
	session := gw.Do(context.Background(), http.MethodGet, "/v1/sessions/mcp-sess-1", nil, map[string]string{"Authorization": "Bearer acme-key"})
	if session.Status != http.StatusOK || !strings.Contains(string(session.Body), `"activeAgent":"billing"`) {
		t.Errorf("GET the session as acme = %d %s", session.Status, session.Body)
	}
	if other := gw.Do(context.Background(), http.MethodGet, "/v1/sessions/mcp-sess-1", nil, map[string]string{"Authorization": "Bearer globex-key"}); other.Status != http.StatusNotFound {
		t.Errorf("GET acme's session as globex = %d, want 404", other.Status)
	}
}

func TestMCPCallErrors(t *testing.T) {
	fake := fakeupstream.New(t, fakeupstream.Reply{Status: http.StatusInternalServerError})
	fake.SetFallback(func(fakeupstream.Request) fakeupstream.Reply {
		return fakeupstream.Reply{Status: http.StatusInternalServerError}
	})
	gw := gwtest.Start(t, mcpYAML, map[string]string{"FAKE_URL": fake.URL})
	cs, err := mcpSession(t, gw, "acme-key")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args map[string]any
		want string
	}{
		{"no message", map[string]any{"message": "  "}, "invalid_request: message is required"},
		{"bad session id", map[string]any{"message": "hi", "session_id": "no spaces allowed"}, "invalid_request: invalid session_id"},
		{"upstream fails", map[string]any{"message": "hi"}, "upstream_error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "parrot", Arguments: tt.args})
			if err != nil {
				t.Fatal(err)
			}
			if got := resultText(t, res); !res.IsError || !strings.HasPrefix(got, tt.want) {
				t.Errorf("result = %q (isError %v), want an error starting %q", got, res.IsError, tt.want)
			}
		})
	}
}

// A graph tool whose run pauses for approvals answers as a chat reply does
// (CONTRACT §6): its text is the "Approval required" lines and its
// structured content carries the event and the approvals. Once decided
// through the HTTP API, a call with an empty message in the session
// resumes the run.
func TestMCPCallPausesForApproval(t *testing.T) {
	fake := fakeupstream.New(t,
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("h1", "transfer_to_billing", `{"reason":"refund"}`)}},
		fakeupstream.Reply{Text: "Refunded."},
	)
	yaml := strings.Replace(mcpYAML, "support: {lead: triage, description: Customer support desk}",
		"support: {lead: triage, description: Customer support desk, permissions: [{tool: transfer_to_billing, action: ask}]}", 1)
	gw := gwtest.Start(t, yaml, map[string]string{"FAKE_URL": fake.URL})
	cs, err := mcpSession(t, gw, "acme-key")
	if err != nil {
		t.Fatal(err)
	}
	call := func(args map[string]any) (string, map[string]any) { return callSupport(t, cs, args) }
	text, meta := call(map[string]any{"message": "refund please", "session_id": "mcp-apr"})
	aps, _ := meta["approvals"].([]any)
	if text != `Approval required: transfer_to_billing {"reason":"refund"}` || meta["event"] != "approval_required" || len(aps) != 1 {
		t.Fatalf("paused call: %q %v", text, meta)
	}
	id, _ := aps[0].(map[string]any)["id"].(string)
	acmeKey := map[string]string{"Authorization": "Bearer acme-key"}
	if r := gw.Do(context.Background(), http.MethodPost, "/v1/sessions/mcp-apr/approvals/"+id, map[string]any{"approve": true}, acmeKey); r.Status != http.StatusOK {
		t.Fatalf("decide: %d %s", r.Status, r.Body)
	}
	text, meta = call(map[string]any{"message": "", "session_id": "mcp-apr"})
	if text != "Refunded." || meta["agentName"] != "billing" || meta["event"] != nil {
		t.Errorf("resumed call: %q %v", text, meta)
	}
	// Without a session an empty message is still an error.
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "support", Arguments: map[string]any{"message": ""}})
	if err != nil || !res.IsError || !strings.Contains(resultText(t, res), "message is required") {
		t.Errorf("empty stateless message: %v %+v", err, res)
	}
}

// A graph whose name MCP does not allow as a tool name (a slash, a space)
// is published under that name with each such character replaced by _,
// its own name as the tool's title, and the call runs the graph.
func TestMCPToolNameOfAGraph(t *testing.T) {
	fake := fakeupstream.New(t, fakeupstream.Reply{Text: "echoed"})
	yaml := strings.Replace(mcpYAML, "  parrot: {lead: echo}\n", "  \"acme/support v2\": {lead: echo}\n", 1)
	gw := gwtest.Start(t, yaml, map[string]string{"FAKE_URL": fake.URL})
	cs, res := listTools(t, gw, "acme-key")
	var got []string
	for _, tool := range res.Tools {
		got = append(got, tool.Name+"|"+tool.Title)
	}
	if !slices.Equal(got, []string{"acme_support_v2|acme/support v2", "support|"}) {
		t.Fatalf("tools %v", got)
	}
	call, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "acme_support_v2", Arguments: map[string]any{"message": "hi"}})
	if err != nil || call.IsError || resultText(t, call) != "echoed" {
		t.Fatalf("call: %v %+v", err, call)
	}
	if m := fake.Requests()[0].Parsed.Model; m != "echo-model" {
		t.Errorf("the call ran %s", m)
	}
}

// A graph whose own name is a valid tool name keeps it: a renamed graph
// whose tool name would be that name, or an earlier renamed graph's, is
// the one left out, with a warning. Here my_graph is reached as my_graph,
// and of "a b" and "a/b" (both a_b) the first by name is published.
func TestMCPToolNameClashKeepsTheRealName(t *testing.T) {
	fake := fakeupstream.New(t, fakeupstream.Reply{Text: "echoed"})
	yaml := strings.Replace(mcpYAML, "  parrot: {lead: echo}\n",
		"  \"my graph\": {lead: triage}\n  my_graph: {lead: echo}\n  \"a/b\": {lead: echo}\n  \"a b\": {lead: triage}\n", 1)
	var logs syncbuf.Buffer
	gw := gwtest.StartLogging(t, gwtest.Compile(t, yaml, map[string]string{"FAKE_URL": fake.URL}), &logs)
	cs, res := listTools(t, gw, "acme-key")
	var got []string
	for _, tool := range res.Tools {
		got = append(got, tool.Name+"|"+tool.Title)
	}
	if want := []string{"a_b|a b", "my_graph|", "support|"}; !slices.Equal(got, want) {
		t.Errorf("tools %v, want %v", got, want)
	}
	call, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "my_graph", Arguments: map[string]any{"message": "hi"}})
	if err != nil || call.IsError || resultText(t, call) != "echoed" {
		t.Fatalf("call: %v %+v", err, call)
	}
	if m := fake.Requests()[0].Parsed.Model; m != "echo-model" {
		t.Errorf("my_graph ran %s, want the graph named my_graph (echo-model)", m)
	}
	for _, want := range []string{
		`"graph":"my graph","tool":"my_graph","other":"my_graph"`,
		`"graph":"a/b","tool":"a_b","other":"a b"`,
	} {
		if n := strings.Count(logs.String(), want); n != 1 {
			t.Errorf("log has %q %d times, want once:\n%s", want, n, logs.String())
		}
	}
}

// A graph tool whose run a guardrail stops answers with the guardrail's
// message, not as an error, and its structured content says so as a chat
// reply's metadata does (CONTRACT §7): event content_filter and the same
// guardrail {name, stage, reason}. The tool's output schema declares both.
func TestMCPCallStoppedByAGuardrail(t *testing.T) {
	fake := fakeupstream.New(t)
	fake.SetFallback(func(fakeupstream.Request) fakeupstream.Reply {
		return fakeupstream.Reply{Text: "Your card is 4111 1111 1111 1111."}
	})
	yaml := strings.Replace(mcpYAML, "graphs:\n", `guardrails:
  no_cards: {regex: '\b(?:\d[ -]?){13,16}\b', message: I can't share card numbers.}
graphs:
`, 1)
	yaml = strings.Replace(yaml, "  parrot: {lead: echo}\n", "  parrot: {lead: echo, output_guardrails: [no_cards]}\n", 1)
	gw := gwtest.Start(t, yaml, map[string]string{"FAKE_URL": fake.URL})
	cs, tools := listTools(t, gw, "acme-key")
	for _, tool := range tools.Tools {
		schema, _ := json.Marshal(tool.OutputSchema)
		var s struct {
			Properties map[string]struct {
				Type       any                        `json:"type"`
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"properties"`
		}
		if err := json.Unmarshal(schema, &s); err != nil {
			t.Fatal(err)
		}
		g := s.Properties["guardrail"].Properties
		if _, ok := s.Properties["event"]; !ok || g["name"] == nil || g["stage"] == nil || g["reason"] == nil {
			t.Errorf("%s's output schema = %s, want event and guardrail {name, stage, reason}", tool.Name, schema)
		}
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "parrot", Arguments: map[string]any{"message": "my card?"}})
	if err != nil {
		t.Fatal(err)
	}
	js, _ := json.Marshal(res.StructuredContent)
	var got map[string]any
	_ = json.Unmarshal(js, &got)
	if res.IsError || resultText(t, res) != "I can't share card numbers." || got["event"] != "content_filter" {
		t.Errorf("tripped call: %q (isError %v) %s, want the guardrail's message and event content_filter", resultText(t, res), res.IsError, js)
	}
	chat := gw.Chat(gwtest.User("parrot", "my card?"), map[string]string{"Authorization": "Bearer acme-key"}).JSON(t)
	want := chat["metadata"].(map[string]any)["guardrail"]
	if want == nil || !cmp.Equal(got["guardrail"], want) {
		t.Errorf("structured guardrail = %v, want the chat reply's metadata.guardrail %v", got["guardrail"], want)
	}
}
