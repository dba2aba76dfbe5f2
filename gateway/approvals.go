package gateway

import (
	"encoding/json"
	"io"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/switchboard-ai/switchboard/runtime"
)

// Approvals through the HTTP API (docs/permissions.md): a paused run's
// reply lists them, and POST /v1/sessions/{id}/approvals/{approvalId}
// decides one.

// pendingApprovals returns the approvals a suspended run waits for, or nil.
func pendingApprovals(res *runtime.Result) []runtime.Approval {
	if res.Suspension == nil {
		return nil
	}
	var out []runtime.Approval
	for _, p := range res.Suspension.Pending {
		if a, ok := p.Data.(runtime.Approval); ok && p.Reason == runtime.SuspendApproval {
			out = append(out, a)
		}
	}
	return out
}

// approvalsJSON is the approvals as one JSON array, the value of a paused
// response's metadata.approvals (Responses metadata holds strings only).
func approvalsJSON(aps []runtime.Approval) string {
	b, err := json.Marshal(aps)
	if err != nil {
		return "[]" // an Approval always encodes: its arguments are a JSON object
	}
	return string(b)
}

// decideApproval records one decision.
func (s *Server) decideApproval(c *gin.Context) {
	key, ok := s.sessionKey(c)
	if !ok {
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, s.cfg.Server.MaxBodyBytes))
	if err != nil {
		s.abort(c, decodeError(err))
		return
	}
	var d approvalDecision
	if err := json.Unmarshal(body, &d); err != nil || d.Approve == nil {
		s.abort(c, badRequest("approve", "the body must be a JSON object with approve (true or false), and optional reason and remember"))
		return
	}
	a, err := s.opts.Runner.DecideApproval(c.Request.Context(), key, runtime.Decision{
		ID: c.Param("approvalId"), Approve: *d.Approve, Reason: d.Reason, Remember: d.Remember,
	})
	if err != nil {
		s.abort(c, fromRunError(err))
		return
	}
	c.JSON(http.StatusOK, a)
}
