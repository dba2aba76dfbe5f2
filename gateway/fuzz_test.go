package gateway

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/switchboard-ai/switchboard/runtime"
)

// The seed corpora live in testdata/fuzz/<FuzzName>/ and run as unit tests
// with plain `go test`. Run a fuzzer for longer with, for example:
//
//	go test ./gateway -run '^$' -fuzz '^FuzzDecodeChatRequest$' -fuzztime 10m

// FuzzDecodeChatRequest checks that decodeChatRequest never panics and that
// what it accepts is what the run loop relies on: known roles, no handoff
// marker from the client, ids on tool calls and tool results, function
// tools with names, and messages that survive the store's JSON round trip.
func FuzzDecodeChatRequest(f *testing.F) {
	f.Add([]byte(`{"model":"support","messages":[{"role":"user","content":"hi"}]}`))
	f.Add([]byte(`{"model":"support","messages":[{"role":"system","content":"sys","handoff":{"from":"a","to":"b"}}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, e := decodeChatRequest(body)
		if e != nil {
			if req != nil {
				t.Fatalf("rejected with %v but returned a request", e)
			}
			if e.Status != 400 || e.Code != codeInvalidRequest || e.Message == "" {
				t.Fatalf("rejection %+v, want a 400 invalid_request with a message", e)
			}
			return
		}
		// No messages is decoded: a paused session's request may carry
		// none (docs/permissions.md); chatCompletions refuses it otherwise.
		if req.Model == "" {
			t.Fatalf("accepted a request without model: %q", body)
		}
		for i, m := range req.Messages {
			if m.Handoff != nil {
				t.Fatalf("messages[%d] kept the client's handoff marker %+v", i, m.Handoff)
			}
			switch m.Role {
			case runtime.RoleSystem, runtime.RoleDeveloper, runtime.RoleUser:
				if len(m.ToolCalls) > 0 {
					t.Fatalf("messages[%d] (%s) carries tool calls", i, m.Role)
				}
			case runtime.RoleAssistant:
				for j, c := range m.ToolCalls {
					if c.ID == "" || c.Function.Name == "" || c.Type != "function" {
						t.Fatalf("messages[%d].tool_calls[%d] = %+v, want id, name and type function", i, j, c)
					}
				}
			case runtime.RoleTool:
				if m.ToolCallID == "" {
					t.Fatalf("messages[%d] is a tool result without tool_call_id", i)
				}
			default:
				t.Fatalf("messages[%d] has role %q", i, m.Role)
			}
		}
		for _, td := range req.clientTools() {
			if td.Name == "" {
				t.Fatalf("accepted a client tool without a name: %q", body)
			}
		}
		_ = req.metadata()

		// Sessions store these messages as JSON and load them back: the
		// round trip must not change them.
		enc, err := json.Marshal(req.Messages)
		if err != nil {
			t.Fatalf("accepted messages do not encode: %v", err)
		}
		var back []runtime.Message
		if err := json.Unmarshal(enc, &back); err != nil {
			t.Fatalf("encoded messages do not decode: %v\n%s", err, enc)
		}
		if diff := cmp.Diff(normalize(req.Messages), normalize(back), cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("messages changed through JSON (-accepted +reloaded):\n%s\nencoded: %s", diff, enc)
		}
	})
}

// normalize drops what a JSON round trip may legitimately rewrite: the
// spacing of verbatim content parts (empty and nil slices are equated by
// the caller).
func normalize(msgs []runtime.Message) []runtime.Message {
	out := make([]runtime.Message, len(msgs))
	for i, m := range msgs {
		if len(m.Parts) > 0 {
			var v any
			if json.Unmarshal(m.Parts, &v) == nil {
				m.Parts, _ = json.Marshal(v)
			}
		}
		out[i] = m
	}
	return out
}

// sessionIDPattern is docs/http-api.md's rule for session ids.
var sessionIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// FuzzSessionID checks validSessionID against the contract's pattern.
//
//	go test ./gateway -run '^$' -fuzz '^FuzzSessionID$' -fuzztime 10m
func FuzzSessionID(f *testing.F) {
	for _, s := range []string{"", "abc", "user:42", strings.Repeat("a", 128), strings.Repeat("a", 129), "a b", "é", "a\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if got, want := validSessionID(id), sessionIDPattern.MatchString(id); got != want {
			t.Fatalf("validSessionID(%q) = %v, want %v", id, got, want)
		}
	})
}
