package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/switchboard-ai/switchboard/runtime"
)

// ResponseStore keeps the Responses API's stored responses as opaque
// records, scoped per principal and living as long as sessions do. The
// session stores implement it (cache.Memory, cache.Redis); the gateway
// decides what a record holds.
type ResponseStore interface {
	// PutResponse stores record under (principal, id), replacing any.
	PutResponse(ctx context.Context, principal, id string, record []byte) error
	// GetResponse returns the record; runtime.ErrNotFound when absent.
	GetResponse(ctx context.Context, principal, id string) ([]byte, error)
	// DeleteResponse forgets the record; runtime.ErrNotFound when absent.
	DeleteResponse(ctx context.Context, principal, id string) error
}

// responseRecord is what a stored response remembers: the session it is a
// point of, where that session stood, and the response as it was sent.
type responseRecord struct {
	Session  string          `json:"session"`
	Point    runtime.Point   `json:"point"`
	Response json.RawMessage `json:"response"`
	// Input is the request's input as GET .../input_items lists it
	// (storedInputItems); records stored before it was kept have none.
	Input []json.RawMessage `json:"input,omitempty"`
	// Deltas are the lengths in bytes of the text deltas the response's
	// stream sent, by output index, so that a replay of it sends the same
	// events under the same sequence numbers (responses_replay.go); none
	// for a response that was not streamed.
	Deltas [][]int `json:"deltas,omitempty"`
}

// codeResponseNotFound answers an unknown response id (docs/http-api.md).
const codeResponseNotFound = "response_not_found"

func responseNotFound(id, param string) *Error {
	return &Error{Status: http.StatusNotFound, Code: codeResponseNotFound, Param: param, Message: "no stored response " + id}
}

// validResponseID reports whether id can be a response id: ids are
// "resp_" and hex, anything else cannot have been stored.
func validResponseID(id string) bool {
	rest, ok := strings.CutPrefix(id, "resp_")
	if !ok || len(rest) == 0 || len(rest) > 128 {
		return false
	}
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// loadResponse reads a stored response of the principal; param names the
// request field that gave the id, for the 404.
func (s *Server) loadResponse(ctx context.Context, principal, id, param string) (*responseRecord, *Error) {
	if s.opts.Responses == nil || !validResponseID(id) {
		return nil, responseNotFound(id, param)
	}
	raw, err := s.opts.Responses.GetResponse(ctx, principal, id)
	if errors.Is(err, runtime.ErrNotFound) {
		return nil, responseNotFound(id, param)
	}
	if err != nil {
		return nil, fromRunError(err)
	}
	var rec responseRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		return nil, fromRunError(fmt.Errorf("decode stored response %s: %w", id, err))
	}
	return &rec, nil
}

// getResponse is GET /v1/responses/{id}: the response as it was sent, or
// with stream=true its stream replayed (responses_replay.go).
func (s *Server) getResponse(c *gin.Context) {
	replay, after, e := replayQuery(c)
	if e == nil {
		var rec *responseRecord
		if rec, e = s.loadResponse(c.Request.Context(), principal(c), c.Param("id"), ""); e == nil {
			if replay {
				s.replayResponse(c, c.Param("id"), rec, after)
			} else {
				c.Data(http.StatusOK, "application/json; charset=utf-8", rec.Response)
			}
			return
		}
	}
	s.abort(c, e)
}

// deleteResponse is DELETE /v1/responses/{id}: the response is forgotten,
// its session stays.
func (s *Server) deleteResponse(c *gin.Context) {
	id := c.Param("id")
	if s.opts.Responses == nil || !validResponseID(id) {
		s.abort(c, responseNotFound(id, ""))
		return
	}
	err := s.opts.Responses.DeleteResponse(c.Request.Context(), principal(c), id)
	if errors.Is(err, runtime.ErrNotFound) {
		s.abort(c, responseNotFound(id, ""))
		return
	}
	if err != nil {
		s.abort(c, fromRunError(err))
		return
	}
	c.JSON(http.StatusOK, gin.H{"id": id, "object": "response", "deleted": true})
}

// cancelResponse is POST /v1/responses/{id}/cancel. OpenAI cancels only a
// response created with background: true while it runs; the gateway runs
// every response within the request that creates it (a request's
// background is accepted and ignored), so a stored response has always
// ended: 400, as OpenAI answers for one that was not in the background;
// 404 response_not_found for an unknown id.
func (s *Server) cancelResponse(c *gin.Context) {
	id := c.Param("id")
	rec, e := s.loadResponse(c.Request.Context(), principal(c), id, "")
	if e != nil {
		s.abort(c, e)
		return
	}
	var head struct {
		Status string `json:"status"`
	}
	_ = json.Unmarshal(rec.Response, &head)
	s.abort(c, badRequest("", "response %s is %s: only a response still running in the background can be cancelled, and the gateway runs every response within the request that creates it", id, head.Status))
}
