package providers

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
	"github.com/switchboard-ai/switchboard/internal/testenv"
	"github.com/switchboard-ai/switchboard/runtime"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testenv.IgnoreIdleWorkers()) }

// fastOptions keeps retries quick in tests.
func fastOptions() Options { return Options{RetryBaseDelay: time.Millisecond} }

// newTestRegistry returns a Registry with one provider "fake" pointing at s.
// edit, when not nil, changes the provider before the Registry is built.
func newTestRegistry(t *testing.T, s *fakeupstream.Server, opts Options, edit func(*graphs.Provider)) *Registry {
	t.Helper()
	p := graphs.Provider{Name: "fake", Kind: graphs.ProviderOpenAI, BaseURL: s.URL, APIKey: "sk-test", Timeout: 5 * time.Second}
	if edit != nil {
		edit(&p)
	}
	r, err := New(map[string]graphs.Provider{"fake": p}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

// userRequest is a minimal request to the fake provider.
func userRequest(text string, stream bool) *runtime.ChatRequest {
	return &runtime.ChatRequest{
		Model:    graphs.ModelRef{Provider: "fake", Model: "gpt-test"},
		Messages: runtime.PromptOf(runtime.Message{Role: runtime.RoleSystem, Content: "You are a test."}, runtime.Message{Role: runtime.RoleUser, Content: text}),
		Stream:   stream,
	}
}

// deltas collects onDelta calls.
type deltas struct{ got []string }

func (d *deltas) add(s string) { d.got = append(d.got, s) }

// waitRequest waits for the n-th request to reach s.
func waitRequest(t *testing.T, s *fakeupstream.Server, n int) fakeupstream.Request {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	reqs, err := s.WaitRequests(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	return reqs[n-1]
}

// waitCanceled fails the test unless the fake upstream saw r cancelled.
func waitCanceled(t *testing.T, r fakeupstream.Request) {
	t.Helper()
	select {
	case <-r.Canceled:
	case <-time.After(5 * time.Second):
		t.Error("the upstream never saw the request cancelled")
	}
}

func ptr[T any](v T) *T { return &v }

// pauseFunc is a function as a runtime.Pauser.
type pauseFunc func()

func (f pauseFunc) Pause() { f() }
