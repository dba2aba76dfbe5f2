package guardrails

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/runtime"
)

// Stages of a check.
const (
	StageInput  = "input"
	StageOutput = "output"
)

// Check is one text a guardrail judges, with what the webhook judge tells
// its endpoint about the run.
type Check struct {
	Guardrail *graphs.Guardrail
	// Stage is StageInput or StageOutput.
	Stage     string
	Text      string
	Agent     string
	Graph     string
	SessionID string
	Principal string
	// Run is the run whose text is checked, and On the agent whose text it
	// is: a model judge's call is one of the run's (RunInfo.CallModel).
	// Nil outside a run.
	Run *runtime.RunInfo
	On  *graphs.Agent
}

// Verdict is a judge's answer.
type Verdict struct {
	Tripwire bool
	Reason   string
}

// Judge decides whether a text trips a guardrail. An error means it could
// not tell; the guardrail's fail_open then decides.
type Judge interface {
	Judge(ctx context.Context, c *Check) (Verdict, error)
}

// Judges dispatches each check to the judge of its guardrail's kind, as
// runtime.ToolKinds does for tools. A kind without a judge fails its checks.
type Judges map[graphs.GuardrailKind]Judge

// Judge implements Judge.
func (js Judges) Judge(ctx context.Context, c *Check) (Verdict, error) {
	j := js[c.Guardrail.Kind]
	if j == nil {
		return Verdict{}, fmt.Errorf("no judge for guardrails of kind %q", c.Guardrail.Kind)
	}
	return j.Judge(ctx, c)
}

// Regex trips on a match of the guardrail's RE2 pattern.
type Regex struct{}

// Judge implements Judge.
func (Regex) Judge(_ context.Context, c *Check) (Verdict, error) {
	if c.Guardrail.Regex == nil {
		return Verdict{}, errors.New("guardrail has no regex")
	}
	if c.Guardrail.Regex.MatchString(c.Text) {
		// The match itself is not echoed: it is what must not be shown.
		return Verdict{Tripwire: true, Reason: "the text matches the guardrail's pattern"}, nil
	}
	return Verdict{}, nil
}

// Model asks an LLM judge through the configured providers: the
// guardrail's instructions as system prompt, the text as the user message,
// a json_object answer {"tripwire": bool, "reason": "..."}.
type Model struct {
	Model runtime.Model
}

var (
	_ Judge = Regex{}
	_ Judge = Model{}
	_ Judge = Judges(nil)
)

// jsonObject is the response_format of a model judge's call.
var jsonObject = json.RawMessage(`{"type":"json_object"}`)

// Judge implements Judge.
func (m Model) Judge(ctx context.Context, c *Check) (Verdict, error) {
	g := c.Guardrail
	msgs := make([]runtime.Message, 0, 2)
	if g.Instructions != "" {
		msgs = append(msgs, runtime.Message{Role: runtime.RoleSystem, Content: g.Instructions})
	}
	msgs = append(msgs, runtime.Message{Role: runtime.RoleUser, Content: c.Text})
	req := &runtime.ChatRequest{
		Model:    g.Model,
		Messages: runtime.Prompt{msgs},
		Params:   &runtime.Params{ResponseFormat: jsonObject},
	}
	var resp *runtime.ChatResponse
	var err error
	if c.Run != nil && c.On != nil {
		resp, err = c.Run.CallModel(ctx, c.On, req)
	} else {
		resp, err = m.Model.Chat(ctx, req, nil)
	}
	if err != nil {
		return Verdict{}, fmt.Errorf("judge model %s: %w", g.Model, err)
	}
	return ParseVerdict([]byte(resp.Message.Content))
}

// ParseVerdict reads a judge's {"tripwire": bool, "reason": "..."}. An
// answer without a boolean tripwire is an error: a judge that cannot be
// read must not pass a text by accident. A model's answer wrapped in a
// ```json fence is read too.
func ParseVerdict(b []byte) (Verdict, error) {
	s := strings.TrimSpace(string(b))
	if rest, ok := strings.CutPrefix(s, "```"); ok {
		rest = strings.TrimPrefix(rest, "json")
		s = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "```"))
	}
	var v struct {
		Tripwire *bool  `json:"tripwire"`
		Reason   string `json:"reason"`
	}
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return Verdict{}, fmt.Errorf("unreadable verdict: %w", err)
	}
	if v.Tripwire == nil {
		return Verdict{}, errors.New("unreadable verdict: no boolean tripwire")
	}
	return Verdict{Tripwire: *v.Tripwire, Reason: v.Reason}, nil
}
