package providers

import (
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	openai "github.com/sashabaranov/go-openai"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
	"github.com/switchboard-ai/switchboard/runtime"
)

// legacyBody is the body the conversion sent before the messages were
// encoded by hand, the reference the spliced body must match: every message
// through go-openai's MarshalJSON, then content "", verbatim parts and the
// top-level fields patched in by decoding the body into maps and encoding
// it again. exact reports that no patch was needed; then go-openai's bytes
// went out as they were, and the new body must equal them byte for byte.
func legacyBody(t *testing.T, req *runtime.ChatRequest) (body []byte, exact bool) {
	t.Helper()
	oreq, _ := toOpenAI(req)
	content := map[int]json.RawMessage{}
	flat := req.Messages.Flat()
	oreq.Messages = make([]openai.ChatCompletionMessage, len(flat))
	for i := range flat {
		m := &flat[i]
		om := openai.ChatCompletionMessage{Role: m.Role, Name: m.Name, ToolCallID: m.ToolCallID}
		switch {
		case len(m.Parts) > 0:
			var parts []openai.ChatMessagePart
			if json.Unmarshal(m.Parts, &parts) == nil {
				om.MultiContent = parts
			}
			content[i] = m.Parts
		case m.Content != "":
			om.Content = m.Content
		case m.Role == runtime.RoleAssistant && len(m.ToolCalls) > 0:
		default:
			content[i] = json.RawMessage(`""`)
		}
		for _, c := range m.ToolCalls {
			args := c.Function.Arguments
			if args == "" {
				args = "{}"
			}
			om.ToolCalls = append(om.ToolCalls, openai.ToolCall{ID: c.ID, Type: openai.ToolTypeFunction,
				Function: openai.FunctionCall{Name: c.Function.Name, Arguments: args}})
		}
		oreq.Messages[i] = om
	}
	fields := map[string]json.RawMessage{}
	if p := req.Params; p != nil {
		if p.Temperature != nil && *p.Temperature == 0 {
			fields["temperature"] = json.RawMessage("0")
		}
		if p.TopP != nil && *p.TopP == 0 {
			fields["top_p"] = json.RawMessage("0")
		}
		if len(p.ResponseFormat) > 0 {
			fields["response_format"] = p.ResponseFormat
		}
	}
	b, err := json.Marshal(oreq)
	if err != nil {
		t.Fatalf("go-openai encoding: %v", err)
	}
	if len(content) == 0 && len(fields) == 0 {
		return b, true
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		t.Fatal(err)
	}
	for k, v := range fields {
		top[k] = v
	}
	var msgs []map[string]json.RawMessage
	if err := json.Unmarshal(top["messages"], &msgs); err != nil {
		t.Fatal(err)
	}
	for i, v := range content {
		msgs[i]["content"] = v
	}
	if top["messages"], err = json.Marshal(msgs); err != nil {
		t.Fatal(err)
	}
	if b, err = json.Marshal(top); err != nil {
		t.Fatal(err)
	}
	return b, false
}

// splicedBody is the body sent now: go-openai's encoding of the request
// without its messages, completed by the patch.
func splicedBody(t *testing.T, req *runtime.ChatRequest) []byte {
	t.Helper()
	oreq, patch := toOpenAI(req)
	goBody, err := json.Marshal(oreq)
	if err != nil {
		t.Fatal(err)
	}
	b, err := patch.build([]byte("reused"), goBody)
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	if !strings.HasPrefix(string(b), "reused") {
		t.Fatalf("build did not append: %s", b)
	}
	return b[len("reused"):]
}

// checkSameBody fails unless the spliced body matches the legacy one.
func checkSameBody(t *testing.T, req *runtime.ChatRequest) {
	t.Helper()
	want, exact := legacyBody(t, req)
	got := splicedBody(t, req)
	if exact {
		if string(got) != string(want) {
			t.Errorf("body bytes differ:\n got %s\nwant %s", got, want)
		}
		return
	}
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("body is not JSON: %v\n%s", err, got)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(w, g); diff != "" {
		t.Errorf("body differs (-legacy +spliced):\n%s\n got %s", diff, got)
	}
}

// tricky are texts whose JSON encoding has a catch.
var tricky = []string{
	"plain", `say "hi" \ there`, "tab\tnew\nline\r\b\f\x00\x1f\x7f", "<b>a & b</b>", "line\u2028para\u2029end",
	"Grüße 👋 日本語", "bad \xff byte", "cut \xe2\x82 rune", "\xed\xa0\x80 surrogate", "\ufffd", "é\u0301",
}

func TestSplicedBodyMatchesGoOpenAI(t *testing.T) {
	call := func(id, name, args string) runtime.ToolCall {
		return runtime.ToolCall{ID: id, Type: "function", Function: runtime.FunctionCall{Name: name, Arguments: args}}
	}
	tests := []struct {
		name string
		msgs []runtime.Message
		edit func(*runtime.ChatRequest)
	}{
		{name: "text", msgs: []runtime.Message{{Role: "system", Content: "You are a desk."}, {Role: "user", Content: "hi"}}},
		{name: "names and developer", msgs: []runtime.Message{{Role: "developer", Content: "d", Name: "ops"}, {Role: "user", Content: "hi", Name: "ann <x>"}}},
		{name: "tool calls and results", msgs: []runtime.Message{
			{Role: "user", Content: "refund"},
			{Role: "assistant", ToolCalls: []runtime.ToolCall{call("call_1", "lookup", `{"q":"<x> & \"y\""}`), call("call_2", "noargs", "")}},
			{Role: "tool", ToolCallID: "call_1", Content: `{"charges":[]}`},
			{Role: "tool", ToolCallID: "call_2"},
			{Role: "assistant", Content: "Done."},
		}},
		{name: "tool call without id or name", msgs: []runtime.Message{
			{Role: "user", Content: "x"}, {Role: "assistant", ToolCalls: []runtime.ToolCall{call("", "", ""), call("c", "", "{}"), call("", "f", "1")}},
		}},
		{name: "assistant text and tool calls", msgs: []runtime.Message{
			{Role: "user", Content: "x"}, {Role: "assistant", Content: "Let me check.", Name: "billing", ToolCalls: []runtime.ToolCall{call("c1", "f", `{}`)}},
		}},
		{name: "empty content on every role", msgs: []runtime.Message{
			{Role: "system"}, {Role: "user"}, {Role: "assistant"}, {Role: "tool", ToolCallID: "c"}, {Role: ""},
		}},
		{name: "text only, HTML and bad UTF-8", msgs: func() []runtime.Message {
			var ms []runtime.Message
			for _, s := range tricky {
				ms = append(ms, runtime.Message{Role: "user", Content: s, Name: s})
			}
			return ms
		}()},
		{name: "tool arguments and ids with tricky text", msgs: func() []runtime.Message {
			var calls []runtime.ToolCall
			for _, s := range tricky {
				calls = append(calls, call(s, s, s))
			}
			return []runtime.Message{{Role: "user", Content: "x"}, {Role: "assistant", ToolCalls: calls}, {Role: "tool", ToolCallID: tricky[3], Content: tricky[4]}}
		}()},
		{name: "content parts", msgs: []runtime.Message{
			{Role: "user", Content: "look", Parts: json.RawMessage(`[{"type":"text","text":"look <here> & \u2028"},{"type":"image_url","image_url":{"url":"data:x","detail":"low"}}]`)},
			{Role: "user", Content: "a", Parts: json.RawMessage(" [ {\"type\": \"input_audio\", \"input_audio\": {\"data\": \"AA==\", \"format\": \"wav\"}} ] ")},
			{Role: "user", Parts: json.RawMessage(`[]`)},
		}},
		{name: "params patch fields", msgs: []runtime.Message{{Role: "user", Content: "<hi>"}}, edit: func(r *runtime.ChatRequest) {
			r.Params = &runtime.Params{Temperature: ptr[float64](0), TopP: ptr[float64](0), Seed: ptr(runtime.IntParam(3)),
				ResponseFormat: json.RawMessage(`{"type":"json_schema","json_schema":{"name":"x <y>","schema":{"type":"object"}}}`)}
		}},
		{name: "params without patch", msgs: []runtime.Message{{Role: "user", Content: "hi"}}, edit: func(r *runtime.ChatRequest) {
			r.Params = &runtime.Params{MaxTokens: ptr(runtime.IntParam(9)), Stop: []string{"<END>"}, User: "u&1"}
		}},
		{name: "tools and stream", msgs: []runtime.Message{{Role: "user", Content: "hi"}}, edit: func(r *runtime.ChatRequest) {
			r.Stream = true
			r.Tools = []runtime.ToolDef{
				{Name: "tricky", Description: `has "messages":[] inside`, Parameters: json.RawMessage(`{"type":"object","properties":{"messages":{"type":"array","default":[]}}}`)},
				{Name: "noargs"},
			}
		}},
		{name: "model name with quotes", msgs: []runtime.Message{{Role: "user", Content: "hi"}}, edit: func(r *runtime.ChatRequest) {
			r.Model.Model = `odd","messages":[] \"model\\`
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := &runtime.ChatRequest{Model: graphs.ModelRef{Provider: "fake", Model: "gpt-4o-mini"}, Messages: runtime.PromptOf(tt.msgs...)}
			if tt.edit != nil {
				tt.edit(req)
			}
			checkSameBody(t, req)
		})
	}
}

// TestSplicedBodyMatchesGoOpenAIRandom compares random transcripts made of
// the pieces whose encoding differs.
func TestSplicedBodyMatchesGoOpenAIRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	alphabet := []byte("ab \"\\<>&\n\x00\x1f\x7f\xc3\xa9\xe2\x80\xa8\xf0\x9f\x91\x8b\xff")
	text := func() string {
		if rng.IntN(4) == 0 {
			return ""
		}
		b := make([]byte, rng.IntN(10))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	roles := []string{"system", "user", "assistant", "tool", "developer"}
	for range 2000 {
		msgs := make([]runtime.Message, 1+rng.IntN(5))
		for i := range msgs {
			m := runtime.Message{Role: roles[rng.IntN(len(roles))], Content: text(), Name: text(), ToolCallID: text()}
			for range rng.IntN(3) {
				m.ToolCalls = append(m.ToolCalls, runtime.ToolCall{ID: text(), Type: "function",
					Function: runtime.FunctionCall{Name: text(), Arguments: text()}})
			}
			msgs[i] = m
		}
		// In runs, as a session's call has them: the body is the same.
		var p runtime.Prompt
		for rest := msgs; len(rest) > 0; {
			k := 1 + rng.IntN(len(rest))
			p, rest = append(p, rest[:k]), rest[k:]
		}
		checkSameBody(t, &runtime.ChatRequest{Model: graphs.ModelRef{Model: text()}, Messages: p})
		if t.Failed() {
			return
		}
	}
}

func TestBuildErrors(t *testing.T) {
	bad := &bodyPatch{messages: runtime.PromptOf(runtime.Message{Role: "user", Parts: json.RawMessage(`[{"type":`)})}
	if _, err := bad.build(nil, []byte(`{"model":"m","messages":[]}`)); err == nil {
		t.Error("invalid content parts were sent")
	}
	badField := &bodyPatch{fields: []patchField{{key: "response_format", value: json.RawMessage(`{`)}}}
	if _, err := badField.build(nil, []byte(`{"model":"m","messages":[]}`)); err == nil {
		t.Error("an invalid field was sent")
	}
	ok := &bodyPatch{messages: runtime.PromptOf(runtime.Message{Role: "user", Content: "hi"})}
	for _, body := range []string{
		`{"messages":[],"model":"m"}`, `{"model":"m","messages":null}`, `{"model":"m"}`, `{"model":"m\"","messages":[]`[:10], ``,
	} {
		if got, err := ok.build(nil, []byte(body)); err == nil {
			t.Errorf("build(%s) = %s, want an error", body, got)
		}
	}
}

// TestBodyAcrossRedirectAndRetries sends a long transcript through a 307
// redirect (the transport re-reads the body with GetBody) and through
// failed attempts, concurrently, and checks that every request the upstream
// saw carries the whole transcript: a body sent from a pooled buffer
// reused too early would show as a corrupt or mixed up body (and as a race
// under -race).
func TestBodyAcrossRedirectAndRetries(t *testing.T) {
	s := fakeupstream.New(t)
	s.SetStrict(true)
	var mu sync.Mutex
	seen := map[string]bool{} // the first attempt of each call fails
	s.SetFallback(func(r fakeupstream.Request) fakeupstream.Reply {
		mu.Lock()
		defer mu.Unlock()
		msgs := r.Parsed.Messages
		if key := msgs[len(msgs)-1].Text(); !seen[key] {
			seen[key] = true
			return fakeupstream.Reply{Status: http.StatusServiceUnavailable}
		}
		return fakeupstream.Reply{Text: "ok"}
	})
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, s.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirect.Close)
	r := newTestRegistry(t, s, fastOptions(), func(p *graphs.Provider) { p.BaseURL = redirect.URL })

	const calls = 8
	errs := make(chan error, calls)
	for c := range calls {
		go func() {
			req := userRequest("fail me", c%2 == 0)
			for i := range 50 {
				req.Messages = append(req.Messages, []runtime.Message{{Role: "user", Content: strings.Repeat("<é>", i) + string(rune('a'+c))}})
			}
			_, err := r.Chat(t.Context(), req, nil)
			errs <- err
		}()
	}
	for range calls {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	reqs := s.Requests()
	if len(reqs) != 2*calls {
		t.Errorf("upstream saw %d requests, want %d (a failed and a good one per call)", len(reqs), 2*calls)
	}
	for n, req := range reqs {
		msgs := req.Parsed.Messages
		if len(msgs) != 52 {
			t.Fatalf("request %d has %d messages, want 52", n, len(msgs))
		}
		last := msgs[51].Text()
		c := last[len(last)-1]
		for i, m := range msgs[2:] {
			if want := strings.Repeat("<é>", i) + string(c); m.Text() != want {
				t.Fatalf("request %d message %d = %q, want %q", n, i+2, m.Content, want)
			}
		}
	}
}
