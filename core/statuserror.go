package core

import (
	"errors"
	"net/http"
)

// StatusError is an error that names the HTTP status a request it stopped is answered with. It is
// how a filter refuses a request body it can only judge while the body streams (a size limit on a
// chunked upload): the filter replaces r.Body with a reader whose Read returns a StatusError, and
// the engine, which reads the body while it forwards the request, sees forwarding fail with it.
//
// What the client gets then depends on how far the exchange got:
//
//   - no response sent to the client yet (the usual case: an upstream answers after the whole
//     body): the engine answers HTTPStatus() through the route's error writer, instead of the
//     502 an upstream failure would get;
//   - the response already started (an upstream that answered early): the engine cannot change
//     it; the upstream exchange is closed as for any body that fails (its connection or stream is
//     dropped, so the upstream never sees the body end normally) and the client's response is
//     aborted.
//
// Either way the upstream has received no more of the body than the reader returned before the
// error. Only errors from the request body are treated so; an upstream's own errors keep their
// 502/504 mapping.
type StatusError interface {
	error
	HTTPStatus() int
}

// ErrBodyTooLarge is the StatusError a request-body reader returns once the body exceeds its
// limit: the engine answers 413 Content Too Large when it can.
var ErrBodyTooLarge error = &statusError{status: http.StatusRequestEntityTooLarge, msg: "request body too large"}

type statusError struct {
	status int
	msg    string
}

func (e *statusError) Error() string   { return e.msg }
func (e *statusError) HTTPStatus() int { return e.status }

// ErrorStatus returns the status of the first StatusError in err's chain (errors.As), and false
// when there is none.
func ErrorStatus(err error) (int, bool) {
	if err == nil {
		return 0, false
	}
	var se StatusError
	if errors.As(err, &se) {
		return se.HTTPStatus(), true
	}
	return 0, false
}
