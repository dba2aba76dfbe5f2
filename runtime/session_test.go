package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-ai/switchboard/cache"
	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/runtime"
)

// recordingStore is a memory store that records the calls a run makes, and
// can fail a releasing Save or hold it back once it has been written.
type recordingStore struct {
	*cache.Memory
	failLast bool          // a Save with Release fails with ErrStoreUnavailable, writing nothing
	holdLast time.Duration // a Save with Release waits this long after writing

	mu    sync.Mutex
	calls []string
}

func (s *recordingStore) record(call string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, call)
}

func (s *recordingStore) Acquire(ctx context.Context, key runtime.SessionKey) (*runtime.Session, runtime.Lease, error) {
	s.record("Acquire")
	return s.Memory.Acquire(ctx, key)
}

func (s *recordingStore) Save(ctx context.Context, key runtime.SessionKey, lease runtime.Lease, w runtime.Write) (int64, error) {
	s.record(fmt.Sprintf("Save(release=%v)", w.Release))
	if w.Release && s.failLast {
		return 0, fmt.Errorf("save: %w", runtime.ErrStoreUnavailable)
	}
	v, err := s.Memory.Save(ctx, key, lease, w)
	if w.Release {
		time.Sleep(s.holdLast)
	}
	return v, err
}

func (s *recordingStore) Release(ctx context.Context, key runtime.SessionKey, lease runtime.Lease) error {
	s.record("Release")
	return s.Memory.Release(ctx, key, lease)
}

// Renew is not recorded: how often it runs depends on timing.

// answerModel answers every call with the same text.
type answerModel struct{}

func (answerModel) Chat(context.Context, *runtime.ChatRequest, func(string)) (*runtime.ChatResponse, error) {
	return &runtime.ChatResponse{Message: runtime.Message{Role: runtime.RoleAssistant, Content: "hello"}, FinishReason: "stop"}, nil
}

// TestSessionTurnReleasesWithLastSave checks the store calls of a session
// turn: the last save gives the lock back itself, and the lock is released
// separately only when that save did not.
func TestSessionTurnReleasesWithLastSave(t *testing.T) {
	cfg, err := graphs.Parse([]byte(`
providers: {fake: {base_url: "http://127.0.0.1:1/v1"}}
agents: {assistant: {instructions: Be brief., model: fake/m}}
graphs: {plain: {lead: assistant}}
`), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		failLast  bool
		holdLast  time.Duration
		lease     time.Duration
		wantErr   error
		wantCalls []string
	}{
		{
			name:      "one round trip for save and release",
			wantCalls: []string{"Acquire", "Save(release=true)"},
		},
		{
			name:      "a failed last save leaves the release to the run",
			failLast:  true,
			wantErr:   runtime.ErrStoreUnavailable,
			wantCalls: []string{"Acquire", "Save(release=true)", "Release"},
		},
		{
			// Renewals every 10ms find the lock gone while the last save
			// returns: the turn still succeeds.
			name:      "a renewal after the last save is not a lost lease",
			holdLast:  100 * time.Millisecond,
			lease:     30 * time.Millisecond,
			wantCalls: []string{"Acquire", "Save(release=true)"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mem := cache.NewMemory(cache.Options{LockLease: tc.lease})
			defer mem.Close()
			store := &recordingStore{Memory: mem, failLast: tc.failLast, holdLast: tc.holdLast}
			r := runtime.New(runtime.Options{Model: answerModel{}, Store: store})
			req := &runtime.Request{Graph: cfg.Graphs["plain"], SessionID: "s",
				Messages: []runtime.Message{{Role: runtime.RoleUser, Content: "hi"}}}
			_, err := r.Run(t.Context(), req, nil)
			if !errors.Is(err, tc.wantErr) || (err != nil) != (tc.wantErr != nil) {
				t.Fatalf("Run: error %v, want %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantCalls, store.calls); diff != "" {
				t.Errorf("store calls mismatch (-want +got):\n%s", diff)
			}
			// Either way the session is free for the next turn at once.
			_, lease, err := mem.Acquire(t.Context(), runtime.SessionKey{ID: "s"})
			if err != nil {
				t.Fatalf("Acquire after the turn: %v", err)
			}
			_ = mem.Release(t.Context(), runtime.SessionKey{ID: "s"}, lease)
		})
	}
}

// instructionsModel answers every call and records the system message of
// each, which names the agent that was called.
type instructionsModel struct {
	mu     sync.Mutex
	system []string
}

func (m *instructionsModel) Chat(_ context.Context, req *runtime.ChatRequest, _ func(string)) (*runtime.ChatResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.system = append(m.system, req.Messages.Flat()[0].Content)
	return &runtime.ChatResponse{Message: runtime.Message{Role: runtime.RoleAssistant, Content: "ok"}, FinishReason: "stop"}, nil
}

// TestSessionActiveAgent checks which agent a session's turn starts with
// (docs/handoffs.md): the one its last handoff marker names, turn after turn,
// or the graph's lead when there is no marker or the graph has no such
// agent; an earlier marker never counts.
func TestSessionActiveAgent(t *testing.T) {
	cfg, err := graphs.Parse([]byte(`
providers: {fake: {base_url: "http://127.0.0.1:1/v1"}}
agents:
  triage: {description: Triage., instructions: I am triage., model: fake/m, handoffs: [billing]}
  billing: {description: Billing., instructions: I am billing., model: fake/m}
  greeter: {instructions: I am greeter., model: fake/m, handoffs: [concierge]}
  concierge: {description: Concierge., instructions: I am concierge., model: fake/m}
graphs: {desk: {lead: triage}, front: {lead: greeter}}
`), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	store := cache.NewMemory(cache.Options{})
	defer store.Close()
	key := runtime.SessionKey{ID: "s"}
	note := func(from, to string) runtime.Message {
		return runtime.Message{Role: runtime.RoleSystem, Content: "routing note", Handoff: &runtime.Marker{From: from, To: to}}
	}
	_, lease, err := store.Acquire(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Save(t.Context(), key, lease, runtime.Write{ActiveAgent: "billing", Release: true, Messages: []runtime.Message{
		{Role: runtime.RoleUser, Content: "hi"}, note("greeter", "concierge"), note("triage", "billing"),
		{Role: runtime.RoleAssistant, Content: "billing here"},
	}}); err != nil {
		t.Fatal(err)
	}
	model := &instructionsModel{}
	r := runtime.New(runtime.Options{Model: model, Store: store})
	for _, step := range []struct{ graph, want string }{
		{"desk", "I am billing."}, {"desk", "I am billing."}, // every turn, with the history read from the cache
		{"front", "I am greeter."}, // billing is not in front: its lead, not the earlier marker's concierge
		{"desk", "I am billing."},
	} {
		res, err := r.Run(t.Context(), &runtime.Request{Graph: cfg.Graphs[step.graph], SessionID: key.ID,
			Messages: []runtime.Message{{Role: runtime.RoleUser, Content: "again"}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := model.system[len(model.system)-1]; !strings.HasPrefix(got, step.want) {
			t.Errorf("graph %s: the call's system message is %q, want it to start with %q (agent %s answered)", step.graph, got, step.want, res.Agent)
		}
	}
}
