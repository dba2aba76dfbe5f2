package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/switchboard-ai/switchboard/runtime"
)

// Error is an error the gateway answers with: an HTTP status and the
// OpenAI error body {"error": {"message", "type", "param", "code"}}.
type Error struct {
	Status  int
	Code    string
	Message string
	Param   string
	// Type overrides the OpenAI error type the status implies.
	Type string
}

// Error implements error.
func (e *Error) Error() string { return e.Code + ": " + e.Message }

// The error codes of docs/http-api.md.
const (
	codeInvalidRequest   = "invalid_request"
	codeInvalidAPIKey    = "invalid_api_key"
	codeModelNotFound    = "model_not_found"
	codeSessionNotFound  = "session_not_found"
	codeSessionBusy      = "session_busy"
	codeTooLarge         = "request_too_large"
	codeMaxSteps         = "max_steps_exceeded"
	codeBudgetExceeded   = "budget_exceeded"
	codeGraphError       = "graph_error"
	codeApprovalNotFound = "approval_not_found"
	codeApprovalDecided  = "approval_decided"
	codeUpstreamError    = "upstream_error"
	codeStoreUnavailable = "store_unavailable"
	codeUpstreamTimeout  = "upstream_timeout"
	codeDraining         = "draining"
	codeSessionTooLarge  = "session_too_large"
	codeSessionCorrupt   = "session_corrupt"
	codeInternal         = "internal_error"
	codeClientClosed     = "client_closed_request"
	codeCrossOrigin      = "cross_origin_forbidden"
)

// errType is the OpenAI error type for a status.
func errType(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status < 500:
		return "invalid_request_error"
	default:
		return "server_error"
	}
}

func badRequest(param, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Code: codeInvalidRequest, Param: param, Message: fmt.Sprintf(format, args...)}
}

// statusClientClosed is nginx's 499: the client went away. It is only
// ever logged and counted; nobody is left to read it.
const statusClientClosed = 499

// fromRunError maps an error of a run to the gateway error it is answered
// with. This is the one place where run failures meet HTTP statuses.
func fromRunError(err error) *Error {
	var ge *Error
	var corrupt *runtime.SessionCorruptError
	switch {
	case errors.As(err, &ge):
		return ge
	case errors.Is(err, runtime.ErrInvalidRequest):
		e := &Error{Status: http.StatusBadRequest, Code: codeInvalidRequest, Message: err.Error()}
		var pe *runtime.ParamError
		if errors.As(err, &pe) {
			e.Param = pe.Param
		}
		return e
	case errors.Is(err, runtime.ErrApprovalNotFound):
		return &Error{Status: http.StatusNotFound, Code: codeApprovalNotFound, Message: "no such approval in this session"}
	case errors.Is(err, runtime.ErrApprovalDecided):
		return &Error{Status: http.StatusConflict, Code: codeApprovalDecided, Message: "this approval was decided before"}
	case errors.Is(err, runtime.ErrBusy), errors.Is(err, runtime.ErrLeaseLost):
		return &Error{Status: http.StatusConflict, Code: codeSessionBusy, Message: "another run holds this session; retry when it has finished"}
	case errors.Is(err, runtime.ErrMaxSteps):
		return &Error{Status: http.StatusUnprocessableEntity, Code: codeMaxSteps, Message: err.Error()}
	case errors.Is(err, runtime.ErrBudgetExceeded):
		return &Error{Status: http.StatusUnprocessableEntity, Code: codeBudgetExceeded, Message: err.Error()}
	case errors.Is(err, runtime.ErrGraph):
		return &Error{Status: http.StatusInternalServerError, Code: codeGraphError, Message: err.Error()}
	case errors.As(err, &corrupt):
		return &Error{Status: http.StatusInternalServerError, Code: codeSessionCorrupt,
			Message: corrupt.Error() + "; DELETE /v1/sessions/" + corrupt.ID + " forgets it"}
	case errors.Is(err, runtime.ErrSessionTooLarge):
		return &Error{Status: http.StatusRequestEntityTooLarge, Code: codeSessionTooLarge,
			Message: "this turn would make the stored session larger than store.max_session_bytes; nothing of it was saved (start a new session, or delete this one)"}
	case errors.Is(err, runtime.ErrStoreUnavailable):
		return &Error{Status: http.StatusServiceUnavailable, Code: codeStoreUnavailable, Message: "the session store is unavailable (it cannot be reached, or could not confirm the write as store.wait_replicas asks); retry later"}
	case errors.Is(err, runtime.ErrUpstreamTimeout):
		return &Error{Status: http.StatusGatewayTimeout, Code: codeUpstreamTimeout, Message: err.Error()}
	case errors.Is(err, runtime.ErrUpstream):
		return &Error{Status: http.StatusBadGateway, Code: codeUpstreamError, Message: err.Error()}
	case errors.Is(err, context.Canceled):
		return &Error{Status: statusClientClosed, Code: codeClientClosed, Message: "the client closed the request"}
	case errors.Is(err, context.DeadlineExceeded):
		return &Error{Status: http.StatusGatewayTimeout, Code: codeUpstreamTimeout, Message: err.Error()}
	default:
		return &Error{Status: http.StatusInternalServerError, Code: codeInternal, Message: err.Error()}
	}
}

// errorBody is the OpenAI error shape.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    string  `json:"code"`
}

func (e *Error) body() errorBody {
	d := errorDetail{Message: e.Message, Type: errType(e.Status), Code: e.Code}
	if e.Type != "" {
		d.Type = e.Type
	}
	if e.Param != "" {
		p := e.Param
		d.Param = &p
	}
	return errorBody{Error: d}
}

// errModelNotFound answers a request for a model that is no graph, on every
// route that runs one.
func errModelNotFound(model string) *Error {
	return &Error{Status: http.StatusNotFound, Code: codeModelNotFound, Param: "model", Message: "the model " + model + " does not exist; GET /v1/models lists the graphs"}
}
