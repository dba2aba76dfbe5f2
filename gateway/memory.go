package gateway

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/switchboard-ai/switchboard/runtime"
)

// MemoryStore reads and forgets memory slots' facts for GET and DELETE
// /v1/memory/{slot} (CONTRACT §9); the session store's backends implement
// it.
type MemoryStore interface {
	// Recall returns key's facts, oldest first.
	Recall(ctx context.Context, key runtime.MemoryKey) ([]string, error)
	// Forget drops key's facts.
	Forget(ctx context.Context, key runtime.MemoryKey) error
}

// codeMemorySlotNotFound answers a slot that is not in the config.
const codeMemorySlotNotFound = "memory_slot_not_found"

// maxScopeValue bounds a scope value of the query, as OpenAI bounds a
// metadata value.
const maxScopeValue = 512

// memoryView is the body of GET /v1/memory/{slot}.
type memoryView struct {
	Slot  string   `json:"slot"`
	Facts []string `json:"facts"`
}

// memoryKey reads the slot of the path and the values of its scope from
// the query, named as the scope names them (?metadata.customer_id=c1,
// ?session=s1); the principal is always the caller's.
func (s *Server) memoryKey(c *gin.Context) (runtime.MemoryKey, bool) {
	name := c.Param("slot")
	slot, ok := s.cfg.Memory[name]
	if !ok || s.opts.Memory == nil {
		s.abort(c, &Error{Status: http.StatusNotFound, Code: codeMemorySlotNotFound, Param: "slot", Message: "no memory slot " + name})
		return runtime.MemoryKey{}, false
	}
	key, missing := runtime.MemoryKeyFor(slot, principal(c), c.Query)
	if missing != "" {
		s.abort(c, badRequest(missing, "memory slot %s is scoped by %s: give its value as the query parameter %s", name, missing, missing))
		return runtime.MemoryKey{}, false
	}
	for _, v := range key.Scope {
		if len(v.Value) > maxScopeValue {
			s.abort(c, badRequest(v.Name, "%s is longer than %d bytes", v.Name, maxScopeValue))
			return runtime.MemoryKey{}, false
		}
	}
	return key, true
}

func (s *Server) getMemory(c *gin.Context) {
	key, ok := s.memoryKey(c)
	if !ok {
		return
	}
	facts, err := s.opts.Memory.Recall(c.Request.Context(), key)
	if err != nil {
		s.abort(c, fromRunError(err))
		return
	}
	if facts == nil {
		facts = []string{}
	}
	c.JSON(http.StatusOK, memoryView{Slot: key.Slot, Facts: facts})
}

func (s *Server) deleteMemory(c *gin.Context) {
	key, ok := s.memoryKey(c)
	if !ok {
		return
	}
	if err := s.opts.Memory.Forget(c.Request.Context(), key); err != nil {
		s.abort(c, fromRunError(err))
		return
	}
	c.Status(http.StatusNoContent)
}
