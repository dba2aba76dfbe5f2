package gateway

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/switchboard-ai/switchboard/runtime"
)

// sessionView is the body of GET /v1/sessions/{id}.
type sessionView struct {
	ID          string            `json:"id"`
	ActiveAgent string            `json:"activeAgent"`
	Version     int64             `json:"version"`
	Transcript  []runtime.Message `json:"transcript"`
	// PendingApprovals are the approvals the session's run waits for.
	PendingApprovals []runtime.Approval `json:"pendingApprovals"`
}

// sessionKey checks the path's session id and scopes it to the caller.
func (s *Server) sessionKey(c *gin.Context) (runtime.SessionKey, bool) {
	id := c.Param("id")
	if !validSessionID(id) {
		s.abort(c, badRequest("id", "invalid session id: 1 to 128 of A-Z a-z 0-9 . _ : -"))
		return runtime.SessionKey{}, false
	}
	return runtime.SessionKey{Principal: principal(c), ID: id}, true
}

func (s *Server) getSession(c *gin.Context) {
	key, ok := s.sessionKey(c)
	if !ok {
		return
	}
	sess, err := s.opts.Runner.Session(c.Request.Context(), key)
	if errors.Is(err, runtime.ErrNotFound) {
		s.abort(c, &Error{Status: http.StatusNotFound, Code: codeSessionNotFound, Message: "no session " + key.ID})
		return
	}
	if err != nil {
		s.abort(c, fromRunError(err))
		return
	}
	t := sess.Messages
	if t == nil {
		t = []runtime.Message{}
	}
	c.JSON(http.StatusOK, sessionView{ID: key.ID, ActiveAgent: sess.ActiveAgent, Version: sess.Version, Transcript: t, PendingApprovals: sess.PendingApprovals()})
}

func (s *Server) deleteSession(c *gin.Context) {
	key, ok := s.sessionKey(c)
	if !ok {
		return
	}
	if err := s.opts.Runner.DeleteSession(c.Request.Context(), key); err != nil {
		s.abort(c, fromRunError(err))
		return
	}
	c.Status(http.StatusNoContent)
}
