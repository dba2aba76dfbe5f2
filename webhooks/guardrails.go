package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/switchboard-ai/switchboard/guardrails"
)

var _ guardrails.Judge = (*Client)(nil)

// guardrailPayload is what an http guardrail is POSTed (README, Guardrails).
type guardrailPayload struct {
	Guardrail string `json:"guardrail"`
	Stage     string `json:"stage"`
	Text      string `json:"text"`
	Agent     string `json:"agent"`
	Graph     string `json:"graph"`
	SessionID string `json:"sessionId"`
	Principal string `json:"principal"`
}

// Judge POSTs the check to its http guardrail and reads the answer
// {"tripwire": bool, "reason": "..."}. A non-2xx status, a timeout, an
// unreachable endpoint or an answer without a boolean tripwire is an error.
func (c *Client) Judge(ctx context.Context, check *guardrails.Check) (guardrails.Verdict, error) {
	g := check.Guardrail
	if g.HTTP == nil {
		return guardrails.Verdict{}, errors.New("not an http guardrail")
	}
	b, err := json.Marshal(guardrailPayload{Guardrail: g.Name, Stage: check.Stage, Text: check.Text, Agent: check.Agent,
		Graph: check.Graph, SessionID: check.SessionID, Principal: check.Principal})
	if err != nil {
		return guardrails.Verdict{}, fmt.Errorf("encode guardrail payload: %w", err)
	}
	out, err := c.post(ctx, g.HTTP.URL, g.HTTP.Timeout, b)
	if err != nil {
		return guardrails.Verdict{}, err
	}
	return guardrails.ParseVerdict(out)
}
