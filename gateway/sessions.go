package gateway

import (
	"errors"
	"net/http"
	"strconv"

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

// Session list limits (GET /v1/sessions?limit=N), as OpenAI's list
// endpoints have them: 20 by default, 1 to 100.
const (
	defaultSessionList = 20
	maxSessionList     = 100
)

// sessionList is the body of GET /v1/sessions.
type sessionList struct {
	Object string             `json:"object"` // always "list"
	Data   []sessionListEntry `json:"data"`
}

// sessionListEntry is one session of the list.
type sessionListEntry struct {
	ID          string `json:"id"`
	ActiveAgent string `json:"activeAgent"`
	Version     int64  `json:"version"`
	// UpdatedAt is the time of the session's last write, in unix seconds.
	UpdatedAt int64 `json:"updatedAt"`
}

// listSessions answers the caller's most recently written sessions, newest
// first. A limit that is not an integer from 1 to 100 is 400, not clamped,
// as OpenAI's list endpoints answer it.
func (s *Server) listSessions(c *gin.Context) {
	limit, err := listLimit(c)
	if err != nil {
		s.abort(c, err)
		return
	}
	infos, lerr := s.opts.Runner.ListSessions(c.Request.Context(), principal(c), limit)
	if lerr != nil {
		s.abort(c, fromRunError(lerr))
		return
	}
	data := make([]sessionListEntry, len(infos))
	for i, in := range infos {
		data[i] = sessionListEntry{ID: in.ID, ActiveAgent: in.ActiveAgent, Version: in.Version, UpdatedAt: in.UpdatedAt.Unix()}
	}
	c.JSON(http.StatusOK, sessionList{Object: "list", Data: data})
}

// listLimit reads ?limit: absent is the default; anything but an integer
// from 1 to maxSessionList is 400 with param limit.
func listLimit(c *gin.Context) (int, *Error) {
	raw, ok := c.GetQuery("limit")
	if !ok {
		return defaultSessionList, nil
	}
	n, err := strconv.Atoi(raw)
	switch {
	case err != nil:
		return 0, badRequest("limit", "invalid 'limit': expected an integer from 1 to %d, got %q", maxSessionList, raw)
	case n < 1:
		return 0, badRequest("limit", "invalid 'limit': integer below minimum value; expected a value >= 1, got %d", n)
	case n > maxSessionList:
		return 0, badRequest("limit", "invalid 'limit': integer above maximum value; expected a value <= %d, got %d", maxSessionList, n)
	}
	return n, nil
}
