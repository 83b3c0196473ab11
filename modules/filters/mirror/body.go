package mirror

import (
	"errors"
	"io"
	"net/http"
	"sync"
)

// tee copies a request body into the mirror's buffer as the primary exchange reads it, up to
// MaxBody. Several mirror filters of one rule share one tee (the first installs it), so a body
// is copied once however many mirrors it has.
//
// Reads may come from another goroutine than the handler's (the stdlib transport writes request
// bodies from its own), even after the handler's next returned, so the buffer is guarded and
// take seals it: what is read after take is passed through without being copied.
type tee struct {
	rc io.ReadCloser

	mu       sync.Mutex
	buf      []byte
	n        int64 // bytes read through the tee
	eof      bool
	overflow bool // the body ran past MaxBody: buf is abandoned
	sealed   bool
}

// teeOf returns r's tee, installing one in front of r.Body when it has none.
func teeOf(r *http.Request) *tee {
	if t, ok := r.Body.(*tee); ok {
		return t
	}
	t := &tee{rc: r.Body}
	if r.ContentLength > 0 {
		t.buf = make([]byte, 0, r.ContentLength)
	}
	r.Body = t
	return t
}

func (t *tee) Read(p []byte) (int, error) {
	n, err := t.rc.Read(p)
	t.mu.Lock()
	if !t.sealed {
		t.n += int64(n)
		switch {
		case t.overflow:
		case t.n > MaxBody:
			t.overflow, t.buf = true, nil
		default:
			t.buf = append(t.buf, p[:n]...)
		}
		if errors.Is(err, io.EOF) {
			t.eof = true
		}
	}
	t.mu.Unlock()
	return n, err
}

func (t *tee) Close() error { return t.rc.Close() }

// take returns the whole body once the primary exchange is done, or the index of the result
// that says why there is none to mirror (res ≥ 0). length is the request's declared
// Content-Length (-1: unknown); the engine reads a declared body to its length, not to EOF.
// The buffer is shared by every mirror of the request, read-only from here on.
func (t *tee) take(length int64) (body []byte, res int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sealed = true
	switch {
	case t.overflow:
		return nil, iTooLarge
	case t.eof || (length >= 0 && t.n == length):
		return t.buf[:len(t.buf):len(t.buf)], -1
	default:
		return nil, iIncomplete
	}
}
