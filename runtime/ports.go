package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"time"

	"github.com/switchboard-ai/switchboard/graphs"
)

// This file declares what the run loop needs from the outside: a model, a
// session store, a tool runner and a hook caller. Other packages satisfy
// these interfaces; runtime knows nothing of HTTP, Redis or any provider SDK.

// ToolDef is a function tool offered to a model.
type ToolDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	// Strict asks the provider to hold the arguments to Parameters exactly
	// (a client tool's `strict`).
	Strict bool `json:"strict,omitempty"`
}

// Params are the client's sampling parameters, passed to every provider call
// of the run. Nil fields are not sent. (tool_choice is not one of them: the
// run sets ChatRequest.ToolChoice per call.)
type Params struct {
	Temperature         *float64        `json:"temperature,omitempty"`
	TopP                *float64        `json:"top_p,omitempty"`
	MaxTokens           *IntParam       `json:"max_tokens,omitempty"`
	MaxCompletionTokens *IntParam       `json:"max_completion_tokens,omitempty"`
	Stop                StopSequences   `json:"stop,omitempty"`
	Seed                *IntParam       `json:"seed,omitempty"`
	PresencePenalty     *float64        `json:"presence_penalty,omitempty"`
	FrequencyPenalty    *float64        `json:"frequency_penalty,omitempty"`
	User                string          `json:"user,omitempty"`
	ParallelToolCalls   *bool           `json:"parallel_tool_calls,omitempty"`
	ResponseFormat      json.RawMessage `json:"response_format,omitempty"`
	// ReasoningEffort is sent as reasoning_effort when not empty.
	ReasoningEffort string `json:"reasoning_effort,omitempty"`
}

// StopSequences is a request's `stop`: OpenAI takes one string or an array
// of them; both decode to a list.
type StopSequences []string

// UnmarshalJSON reads a string, an array of strings or null. Another value
// is refused like a value of the wrong type, so that the field is named
// (encoding/json fills it in).
func (s *StopSequences) UnmarshalJSON(b []byte) error {
	refuse := func(what string) error {
		return &json.UnmarshalTypeError{Value: what, Type: reflect.TypeFor[StopSequences]()}
	}
	switch b[0] {
	case '"':
		var one string
		if err := json.Unmarshal(b, &one); err != nil {
			return err
		}
		*s = StopSequences{one}
		return nil
	case '[':
		if err := json.Unmarshal(b, (*[]string)(s)); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				return refuse("array holding a " + te.Value)
			}
			return err
		}
		return nil
	case 'n':
		*s = nil
		return nil
	case 't', 'f':
		return refuse("bool")
	case '{':
		return refuse("object")
	default:
		return refuse("number")
	}
}

// ChatRequest is one provider call. Messages already obey the system
// message rule of docs/handoffs.md: at most one system message, and it
// comes first.
type ChatRequest struct {
	Model    graphs.ModelRef
	Messages Prompt
	Tools    []ToolDef
	Params   *Params
	// Stream asks for a streamed call; text deltas then reach onDelta as the
	// provider produces them. Usage is asked for on every streamed call.
	Stream bool
	// ToolChoice, when not nil, is sent verbatim as tool_choice; the run
	// sets it only on calls that offer tools.
	ToolChoice json.RawMessage
}

// Usage counts tokens.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	// The providers' details, when they give them (0 otherwise): prompt
	// tokens read from the provider's cache, and completion tokens spent
	// reasoning. Replies render them (prompt_tokens_details,
	// completion_tokens_details); they are not in this type's JSON.
	CachedTokens    int `json:"-"`
	ReasoningTokens int `json:"-"`
}

// Add adds u2 to u.
func (u *Usage) Add(u2 Usage) {
	u.PromptTokens += u2.PromptTokens
	u.CompletionTokens += u2.CompletionTokens
	u.TotalTokens += u2.TotalTokens
	u.CachedTokens += u2.CachedTokens
	u.ReasoningTokens += u2.ReasoningTokens
}

// ChatResponse is a provider's answer to one call.
type ChatResponse struct {
	// Message is the assistant message, with tool calls assembled.
	Message      Message
	FinishReason string
	Usage        Usage
	// ID is the provider's completion id, when it gave one.
	ID string
}

// Model calls a model at a provider.
type Model interface {
	// Chat makes one provider call. onDelta, when not nil, receives text
	// deltas of a streamed call in order. Errors wrap ErrUpstream or
	// ErrUpstreamTimeout (or ctx.Err() when the caller went away). Retries
	// before the first byte are the Model's business; fallbacks are the run's.
	// req is the caller's, and its messages are in part a session's
	// history, shared with the store: a Model reads them and never changes
	// them. A Model that streams may take StreamPauser(ctx), so that the
	// deltas it reads together reach the client together.
	Chat(ctx context.Context, req *ChatRequest, onDelta func(text string)) (*ChatResponse, error)
}

// Errors a Model returns, wrapped.
var (
	// ErrUpstream: the provider failed (connection refused, 5xx, bad answer).
	ErrUpstream = errors.New("upstream error")
	// ErrUpstreamTimeout: the provider did not answer in time.
	ErrUpstreamTimeout = errors.New("upstream timeout")
)

// SessionKey names a session: sessions are isolated per principal.
type SessionKey struct {
	Principal string
	ID        string
}

// Session is a session's stored state.
type Session struct {
	Messages    []Message
	ActiveAgent string // empty: the lead
	// Approvals are the session's approvals, pending and decided.
	Approvals []Approval
	// Version counts writes; 0 is a session never written.
	Version int64
}

// SessionInfo is what a session list shows of one session.
type SessionInfo struct {
	ID          string
	ActiveAgent string // empty: the lead
	Version     int64
	// UpdatedAt is the time of the session's last write.
	UpdatedAt time.Time
}

// Lease is the proof that a run holds a session's lock. Writes made with a
// lease that has expired or been taken over fail with ErrLeaseLost, so a
// stalled gateway can never overwrite a newer state (fencing).
type Lease struct {
	Token string
	TTL   time.Duration
}

// Write is one step's save: Messages are appended, or, when Replace is set
// (an input filter rewrote the transcript), they become the whole transcript.
type Write struct {
	Messages    []Message
	Replace     bool
	ActiveAgent string
	// SetApprovals replaces the session's approvals with Approvals;
	// otherwise they stay as they are.
	SetApprovals bool
	Approvals    []Approval
	// Release releases the lock in the same round trip, after the write, as
	// a Release with the same lease would: a run's last save need not wait
	// for a second call. A Release after it is a no-op. When Save fails
	// the lock may still be held, so the caller releases it as usual.
	Release bool
}

// Store keeps sessions. Every method is bounded by the store's own timeout
// and returns an error wrapping ErrStoreUnavailable when it cannot reach its
// backend.
//
// A store copies the messages it is given, and shares the ones it returns:
// a loaded Session's Messages are read only, for the caller and the store
// alike, and stay as they were loaded whatever is saved later. Their
// capacity is their length, so that appending to them copies. A turn of a
// long session then costs what its new messages cost, not a copy of the
// whole transcript.
type Store interface {
	// Acquire takes the session's lock and loads its state; a session never
	// written loads as an empty Session. ErrBusy when another run holds it.
	Acquire(ctx context.Context, key SessionKey) (*Session, Lease, error)
	// Save writes one step under the lease and returns the new version.
	Save(ctx context.Context, key SessionKey, lease Lease, w Write) (int64, error)
	// Renew extends the lease; ErrLeaseLost when it is gone.
	Renew(ctx context.Context, key SessionKey, lease Lease) error
	// Release gives the lock back; releasing a lost lease is not an error.
	Release(ctx context.Context, key SessionKey, lease Lease) error
	// Load reads a session without locking it; ErrNotFound when absent.
	Load(ctx context.Context, key SessionKey) (*Session, error)
	// Delete forgets a session; deleting an absent one is not an error.
	Delete(ctx context.Context, key SessionKey) error
	// List returns up to limit of principal's sessions, the most recently
	// written first. A session that expired or was deleted is not listed.
	// It is backed by an index that a Save updates at a constant cost, so
	// neither a write nor a list reads every session of the principal.
	List(ctx context.Context, principal string, limit int) ([]SessionInfo, error)
	// Ping reports whether the backend answers.
	Ping(ctx context.Context) error
	// Close releases the store's resources.
	Close() error
}

// Errors a Store returns, wrapped.
var (
	ErrBusy             = errors.New("session busy")
	ErrLeaseLost        = errors.New("session lease lost")
	ErrNotFound         = errors.New("session not found")
	ErrStoreUnavailable = errors.New("session store unavailable")
)

// HookCaller calls an on_handoff or on_approval_required webhook.
type HookCaller interface {
	// Call POSTs payload as JSON to the hook; errors are logged and traced
	// by the run, never fatal.
	Call(ctx context.Context, hook *graphs.Hook, payload any) error
}

// Metrics records what a run does. A nil Metrics in Options records nothing.
type Metrics interface {
	// Handoff counts one handoff call by its outcome (accepted, invalid_args,
	// limit_exceeded, extra_in_turn, denied).
	Handoff(graph, from, to, outcome string)
	// ModelCall records one provider call: its latency, usage and whether it
	// failed.
	ModelCall(provider, model string, seconds float64, usage Usage, failed bool)
	// ToolCall records one server-side tool call.
	ToolCall(tool string, seconds float64, failed bool)
	// PermissionDecision counts one decision of the permission gate
	// (allowed, denied, pending, approved, rejected, expired).
	PermissionDecision(graph, tool, decision string)
}
