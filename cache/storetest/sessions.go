package storetest

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-ai/switchboard/runtime"
)

// Tests of what one session holds: versions, order, replace, exact round
// trips, copies, isolation, deletion and TTL.

func testNewSession(t *testing.T, open NewStore) {
	s := open(t, defaults())
	k := sessionKey(t, s, "new")
	_, err := s.Load(t.Context(), k)
	wantErr(t, "Load of a new session", err, runtime.ErrNotFound)

	sess, lease := acquire(t, s, k)
	if diff := cmp.Diff(&runtime.Session{}, sess); diff != "" {
		t.Errorf("Acquire of a new session mismatch (-want +got):\n%s", diff)
	}
	if lease.Token == "" || lease.TTL != defaults().LockLease {
		t.Errorf("Acquire lease = %+v, want a token and TTL %v", lease, defaults().LockLease)
	}
	release(t, s, k, lease)
	_, err = s.Load(t.Context(), k)
	wantErr(t, "Load after an Acquire without Save", err, runtime.ErrNotFound)
}

func testAppend(t *testing.T, open NewStore) {
	s := open(t, defaults())
	k := sessionKey(t, s, "append")
	_, lease := acquire(t, s, k)
	save(t, s, k, lease, runtime.Write{Messages: []runtime.Message{text(runtime.RoleUser, "hi")}, ActiveAgent: "triage"}, 1)
	save(t, s, k, lease, runtime.Write{Messages: []runtime.Message{
		text(runtime.RoleAssistant, "hello"), text(runtime.RoleUser, "my bill"),
	}, ActiveAgent: "billing"}, 2)
	save(t, s, k, lease, runtime.Write{ActiveAgent: "billing"}, 3) // a step that adds nothing still counts
	release(t, s, k, lease)
	wantSession(t, s, k, &runtime.Session{
		Messages: []runtime.Message{
			text(runtime.RoleUser, "hi"), text(runtime.RoleAssistant, "hello"), text(runtime.RoleUser, "my bill"),
		},
		ActiveAgent: "billing",
		Version:     3,
	})
}

func testReplace(t *testing.T, open NewStore) {
	s := open(t, defaults())
	k := sessionKey(t, s, "replace")
	write(t, s, k, runtime.Write{Messages: numbered("old", 3), ActiveAgent: "triage"})
	_, lease := acquire(t, s, k)
	save(t, s, k, lease, runtime.Write{Messages: numbered("new", 1), Replace: true, ActiveAgent: "refunds"}, 2)
	save(t, s, k, lease, runtime.Write{Messages: []runtime.Message{text(runtime.RoleAssistant, "done")}, ActiveAgent: "refunds"}, 3)
	release(t, s, k, lease)
	wantSession(t, s, k, &runtime.Session{
		Messages:    append(numbered("new", 1), text(runtime.RoleAssistant, "done")),
		ActiveAgent: "refunds",
		Version:     3,
	})

	// A session's first write may be a replace.
	k2 := sessionKey(t, s, "replace-first")
	write(t, s, k2, runtime.Write{Messages: numbered("x", 2), Replace: true})
	wantSession(t, s, k2, &runtime.Session{Messages: numbered("x", 2), Version: 1})
}

// transcript returns a transcript that uses every field a Message has, in
// the canonical form a request decodes to (compact parts, Content the
// concatenation of their text).
func transcript() []runtime.Message {
	return []runtime.Message{
		{Role: runtime.RoleSystem, Content: "client context"},
		{Role: runtime.RoleUser, Name: "alice", Content: "What is on this bill?",
			Parts: json.RawMessage(`[{"type":"text","text":"What is on "},{"type":"image_url","image_url":{"url":"https://example.com/bill.png"}},{"type":"text","text":"this bill?"}]`)},
		{Role: runtime.RoleAssistant, ToolCalls: []runtime.ToolCall{
			{ID: "call_1", Type: "function", Function: runtime.FunctionCall{Name: "lookup_charges", Arguments: `{"limit":3}`}},
			{ID: "call_2", Type: "function", Function: runtime.FunctionCall{Name: "transfer_to_billing", Arguments: `{"reason":"duplicate charge"}`}},
		}},
		{Role: runtime.RoleTool, ToolCallID: "call_1", Content: `[{"id":"ch_1","amount":12.5}]`},
		{Role: runtime.RoleTool, ToolCallID: "call_2", Content: `{"assistant": "billing"}`},
		{Role: runtime.RoleSystem, Content: `[routing note - not from the user] handoff triage -> billing: reason="duplicate charge"`,
			Handoff: &runtime.Marker{From: "triage", To: "billing"}},
		{Role: runtime.RoleDeveloper, Content: "be brief"},
		{Role: runtime.RoleAssistant, Content: "Grüße 👋 <b>&amp;</b>\n\t\"quoted\" \u2028 end", ToolCalls: []runtime.ToolCall{
			{ID: "call_3", Type: "function", Function: runtime.FunctionCall{Name: "client_tool", Arguments: "{}"}},
		}},
		{Role: runtime.RoleUser, Content: ""},
	}
}

func testRoundTrip(t *testing.T, open NewStore) {
	a := open(t, defaults())
	k := sessionKey(t, a, "round-trip")
	msgs := transcript()
	write(t, a, k, runtime.Write{Messages: msgs[:3], ActiveAgent: "triage"})
	write(t, a, k, runtime.Write{Messages: msgs[3:], ActiveAgent: "billing"})
	want := &runtime.Session{Messages: transcript(), ActiveAgent: "billing", Version: 2}
	wantSession(t, a, k, want)
	// A second store reads what the first wrote without having seen it.
	wantSession(t, open(t, defaults()), k, want)
}

// testCopies checks that a store copies what it is given and that what it
// returns, which it shares (see runtime.Store), stays as loaded: clipped, so
// that a caller's append cannot reach the store's memory, and untouched by
// later saves, appended or replacing.
func testCopies(t *testing.T, open NewStore) {
	s := open(t, defaults())
	k := sessionKey(t, s, "copies")
	want := &runtime.Session{Messages: transcript(), ActiveAgent: "billing", Version: 1}

	msgs := transcript()
	write(t, s, k, runtime.Write{Messages: msgs, ActiveAgent: "billing"})
	scribble(msgs)
	wantSession(t, s, k, want)

	loaded, err := s.Load(t.Context(), k)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	acquired, lease := acquire(t, s, k)
	for what, got := range map[string][]runtime.Message{"Load": loaded.Messages, "Acquire": acquired.Messages} {
		if cap(got) != len(got) {
			t.Errorf("%s: messages have capacity %d past their length %d", what, cap(got), len(got))
		}
	}
	// A caller appends to what it loaded, as a run does.
	grown := append(acquired.Messages, text(runtime.RoleUser, "appended by the caller"))
	scribble(grown[len(grown)-1:])
	save(t, s, k, lease, runtime.Write{Messages: numbered("next", 2), ActiveAgent: "billing"}, 2)
	release(t, s, k, lease)
	want2 := &runtime.Session{Messages: append(transcript(), numbered("next", 2)...), ActiveAgent: "billing", Version: 2}
	wantSession(t, s, k, want2)

	got, lease := acquire(t, s, k)
	save(t, s, k, lease, runtime.Write{Messages: numbered("replaced", 1), Replace: true, ActiveAgent: "triage"}, 3)
	release(t, s, k, lease)
	wantSession(t, s, k, &runtime.Session{Messages: numbered("replaced", 1), ActiveAgent: "triage", Version: 3})
	for what, got := range map[string]*runtime.Session{"Load": loaded, "Acquire": acquired} {
		if diff := cmp.Diff(want.Messages, got.Messages); diff != "" {
			t.Errorf("%s's messages changed after later saves (-want +got):\n%s", what, diff)
		}
	}
	if diff := cmp.Diff(want2, got); diff != "" {
		t.Errorf("second Acquire's session changed after a replacing save (-want +got):\n%s", diff)
	}
}

// scribble changes every message of msgs in place, as a caller that edits
// what it saved might.
func scribble(msgs []runtime.Message) {
	for i := range msgs {
		m := &msgs[i]
		m.Content += " (edited)"
		if len(m.Parts) > 0 {
			m.Parts[0] = ' '
		}
		for j := range m.ToolCalls {
			m.ToolCalls[j].Function.Arguments = `{"edited":true}`
		}
		if m.Handoff != nil {
			m.Handoff.To = "edited"
		}
	}
	msgs[0].Role = "edited"
}

func testLoadDelete(t *testing.T, open NewStore) {
	s := open(t, defaults())
	k := sessionKey(t, s, "delete")
	if err := s.Delete(t.Context(), k); err != nil {
		t.Fatalf("Delete of an absent session: %v", err)
	}
	write(t, s, k, runtime.Write{Messages: numbered("m", 2)})
	wantSession(t, s, k, &runtime.Session{Messages: numbered("m", 2), Version: 1})
	if err := s.Delete(t.Context(), k); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	_, err := s.Load(t.Context(), k)
	wantErr(t, "Load after Delete", err, runtime.ErrNotFound)
	sess, lease := acquire(t, s, k)
	release(t, s, k, lease)
	if diff := cmp.Diff(&runtime.Session{}, sess); diff != "" {
		t.Errorf("Acquire after Delete mismatch (-want +got):\n%s", diff)
	}
}

func testIsolation(t *testing.T, open NewStore) {
	s := open(t, defaults())
	p := principal()
	// Pairs that a naive "principal:id" key would merge, and characters
	// that could break a key's layout.
	keys := []runtime.SessionKey{
		keyOf(t, s, p, "same"),
		keyOf(t, s, p+"-other", "same"),
		keyOf(t, s, p+":a", "b"),
		keyOf(t, s, p, "a:b"),
		keyOf(t, s, p+"{x}", "y"),
		keyOf(t, s, p+"{x", "}y"),
		keyOf(t, s, p+"%3A", "z"),
		keyOf(t, s, p+":", "z"),
	}
	held := make([]runtime.Lease, len(keys))
	for i, k := range keys {
		var sess *runtime.Session
		sess, held[i] = acquire(t, s, k) // one run's lock does not block another session
		if sess.Version != 0 {
			t.Fatalf("Acquire(%v) = version %d, want a new session", k, sess.Version)
		}
	}
	for i, k := range keys {
		save(t, s, k, held[i], runtime.Write{Messages: numbered(k.Principal+"|"+k.ID, 1)}, 1)
		release(t, s, k, held[i])
	}
	for _, k := range keys {
		wantSession(t, s, k, &runtime.Session{Messages: numbered(k.Principal+"|"+k.ID, 1), Version: 1})
	}
	_, err := s.Load(t.Context(), runtime.SessionKey{Principal: principal(), ID: "same"})
	wantErr(t, "Load under another principal", err, runtime.ErrNotFound)
}

func testTTL(t *testing.T, open NewStore) {
	cfg := defaults()
	// Margins of 400 ms or more on either side: a loaded machine oversleeps.
	cfg.SessionTTL = time.Second
	s := open(t, cfg)
	k := sessionKey(t, s, "ttl")
	_, lease := acquire(t, s, k)
	save(t, s, k, lease, runtime.Write{Messages: numbered("m", 1)}, 1)
	time.Sleep(600 * time.Millisecond)
	save(t, s, k, lease, runtime.Write{Messages: slices.Clone(numbered("m", 2)[1:])}, 2)
	release(t, s, k, lease)
	time.Sleep(600 * time.Millisecond) // past the first write's TTL, within the second's
	wantSession(t, s, k, &runtime.Session{Messages: numbered("m", 2), Version: 2})

	time.Sleep(cfg.SessionTTL)
	_, err := s.Load(t.Context(), k)
	wantErr(t, "Load after the TTL", err, runtime.ErrNotFound)
	sess, lease := acquire(t, s, k)
	release(t, s, k, lease)
	if diff := cmp.Diff(&runtime.Session{}, sess); diff != "" {
		t.Errorf("Acquire after the TTL mismatch (-want +got):\n%s", diff)
	}
}

// testSessionTooLarge: a save that would make the transcript's JSON larger
// than max_session_bytes fails with ErrSessionTooLarge and writes nothing;
// a Replace counts from zero.
func testSessionTooLarge(t *testing.T, open NewStore) {
	cfg := defaults()
	cfg.MaxSessionBytes = 4096
	s := open(t, cfg)
	k := sessionKey(t, s, "big")
	kilo := func(c string) runtime.Message { return text(runtime.RoleUser, strings.Repeat(c, 1000)) }
	write(t, s, k, runtime.Write{Messages: []runtime.Message{kilo("a"), kilo("b")}, ActiveAgent: "a1"})
	write(t, s, k, runtime.Write{Messages: []runtime.Message{kilo("c")}, ActiveAgent: "a1"})
	before, err := s.Load(t.Context(), k)
	if err != nil {
		t.Fatal(err)
	}

	sess, lease := acquire(t, s, k)
	_, err = s.Save(t.Context(), k, lease, runtime.Write{Messages: []runtime.Message{kilo("d"), kilo("e")}, ActiveAgent: "a2"})
	wantErr(t, "a save past max_session_bytes", err, runtime.ErrSessionTooLarge)
	release(t, s, k, lease)
	if sess.Version != 2 {
		t.Fatalf("version %d before the refused save, want 2", sess.Version)
	}
	wantSession(t, s, k, before)

	// A transcript rewritten small (an input filter) may grow again.
	v := write(t, s, k, runtime.Write{Messages: []runtime.Message{kilo("f")}, Replace: true, ActiveAgent: "a3"})
	write(t, s, k, runtime.Write{Messages: []runtime.Message{kilo("g"), kilo("h")}, ActiveAgent: "a3"})
	if v != 3 {
		t.Fatalf("version %d after the replace, want 3", v)
	}
}
