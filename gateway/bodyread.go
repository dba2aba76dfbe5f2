package gateway

import (
	"errors"
	"net"
	"net/http"
)

// The server's read timeout (server.read_timeout, on the http.Server)
// bounds how long a request's headers and body may take to arrive. It does
// not bound the answer: net/http lifts a request's read deadline once the
// body is read, when it starts watching for the client going away
// (TestRunsOutliveTheReadTimeout guards that), so runs and streams are
// bounded by their own timeouts instead.

// bodyReadError answers a body that could not be read. The network error
// itself names the connection's addresses, which a client is not told.
func bodyReadError(err error) *Error {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return &Error{Status: http.StatusRequestTimeout, Code: codeInvalidRequest, Message: "the request body did not arrive within the server's read timeout"}
	case errors.As(err, &ne):
		return badRequest("", "cannot read the request body: the connection failed before its end")
	default: // a malformed body framing: the client's own error
		return badRequest("", "cannot read the request body: %v", err)
	}
}
