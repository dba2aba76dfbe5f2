package runtime

import (
	"errors"
	"fmt"
)

// Errors a run returns, wrapped with what went wrong. The gateway maps each
// to its status and code (docs/http-api.md).
var (
	// ErrInvalidRequest: the request cannot start a run (no new input in a
	// session, a client tool that clashes with the agent's own, ...).
	ErrInvalidRequest = errors.New("invalid request")
	// ErrMaxSteps: the run would need one model call more than max_steps.
	ErrMaxSteps = errors.New("max steps exceeded")
	// ErrGraph: the graph cannot go on (an input filter left no message).
	ErrGraph = errors.New("graph error")
)

// ParamError is an ErrInvalidRequest caused by one request field, which
// Param names as the client wrote it.
type ParamError struct {
	Param string
	Msg   string
}

// Error implements error.
func (e *ParamError) Error() string { return ErrInvalidRequest.Error() + ": " + e.Msg }

// Unwrap makes a ParamError an ErrInvalidRequest.
func (e *ParamError) Unwrap() error { return ErrInvalidRequest }

func paramError(param, format string, args ...any) *ParamError {
	return &ParamError{Param: param, Msg: fmt.Sprintf(format, args...)}
}

// RunError is the error of a run that failed once it had started, with
// what it had spent by then: a reply that reports a failure may still
// report the tokens of the model calls that answered (the Responses API's
// response.failed). It wraps the cause; Run returns one for every run it
// started.
type RunError struct {
	// Usage sums the run's model calls that answered before it failed.
	Usage Usage
	// Point is where the run's session stands after the steps it saved
	// (a response that failed may be continued from it); nil for a run
	// outside a session.
	Point *Point
	Err   error
}

// Error implements error: the cause's message.
func (e *RunError) Error() string { return e.Err.Error() }

// Unwrap returns the cause.
func (e *RunError) Unwrap() error { return e.Err }
