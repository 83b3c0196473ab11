package proxy

import (
	"context"
	"errors"
	"net/http"
)

// maxDiscard bounds how much of a retried response's body a try reads and drops before it
// gives up on the upstream connection: a small error body is drained so the connection can be
// kept, a large one costs a connection rather than its transfer.
const maxDiscard = 64 << 10

// errRetried is what a retried response's writer returns once maxDiscard is reached.
var errRetried = errors.New("response held back for a retry")

type tryState uint8

const (
	tryPending   tryState = iota // nothing decided: the header is this try's own
	tryRetry                     // the try is retried: whatever it writes is dropped
	tryCommitted                 // the try is the answer: everything goes to the client
)

// tryWriter is the client's writer for a try that is not the last. It holds the response back
// until its status shows whether the try is retried: a retried status, and its body, are
// dropped; any other status commits the try, and from then on the client gets everything as
// written (so nothing is retried once the response has started). A failure before the header
// that a retry covers is absorbed (absorbed) instead of being answered.
type tryWriter struct {
	w         http.ResponseWriter
	parent    context.Context // the whole request's: once it ends, nothing is retried
	p         *retryPolicy
	h         http.Header // this try's header until it commits
	state     tryState
	reason    retryReason
	discarded int
}

var _ http.Flusher = (*tryWriter)(nil)

// newTryWriter starts from the client's header as the engine left it before forwarding.
func newTryWriter(w http.ResponseWriter, parent context.Context, p *retryPolicy) *tryWriter {
	return &tryWriter{w: w, parent: parent, p: p, h: w.Header().Clone()}
}

func (t *tryWriter) Header() http.Header {
	if t.state == tryCommitted {
		return t.w.Header()
	}
	return t.h
}

func (t *tryWriter) WriteHeader(code int) {
	switch t.state {
	case tryCommitted:
		t.w.WriteHeader(code)
	case tryPending:
		if code >= 200 && t.p.retriesStatus(code) && t.parent.Err() == nil {
			t.state, t.reason = tryRetry, reasonStatus
			return
		}
		t.commit()
		t.w.WriteHeader(code)
	}
}

func (t *tryWriter) Write(b []byte) (int, error) {
	switch t.state {
	case tryPending:
		t.WriteHeader(http.StatusOK)
		return t.Write(b)
	case tryRetry:
		if t.discarded+len(b) > maxDiscard {
			return 0, errRetried
		}
		t.discarded += len(b)
		return len(b), nil
	}
	return t.w.Write(b)
}

// Flush flushes the client's response once the try is the answer; before, there is nothing to
// flush.
func (t *tryWriter) Flush() { _ = t.FlushError() }

func (t *tryWriter) FlushError() error {
	if t.state != tryCommitted {
		return nil
	}
	return http.NewResponseController(t.w).Flush()
}

// Unwrap lets http.ResponseController reach the client's writer (deadlines).
func (t *tryWriter) Unwrap() http.ResponseWriter { return t.w }

// commit makes the try the answer: its header becomes the client's. Nil-safe (the last try has
// no tryWriter).
func (t *tryWriter) commit() {
	if t == nil || t.state == tryCommitted {
		return
	}
	t.state = tryCommitted
	h := t.w.Header()
	clear(h)
	for k, vv := range t.h {
		h[k] = vv
	}
}

// absorb holds back a failure before the header for a retry, if one covers it.
func (t *tryWriter) absorb(r *http.Request, err error) bool {
	if t.state != tryPending {
		return false
	}
	reason := failureReason(t.parent, r, err)
	if reason == reasonNone {
		return false
	}
	t.state, t.reason = tryRetry, reason
	return true
}

// retryReason is why the try is retried, none when it is the answer.
func (t *tryWriter) retryReason() retryReason {
	if t.state != tryRetry {
		return reasonNone
	}
	return t.reason
}
