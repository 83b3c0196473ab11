package proxy

import (
	"errors"
	"io"
	"net"
	"net/http"
	"sync"

	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/core/proxy/internal/h1server"
)

// maxBufferedBody is the largest request body the fast path takes. It reads such a body whole
// before it picks an upstream connection, which buys three things: the upstream connection is not
// held while a slow client uploads; a stale pooled connection can be retried with the body; and
// the body is written before the response is read without risk of a stall, since an upstream
// that answers early without reading fits 64 KiB in the socket buffers (its receive and our send
// buffer) anyway.
const maxBufferedBody = 64 << 10

// smallBody is the size of the small body buffers, which most request bodies fit.
const smallBody = 4 << 10

// Body buffers, in two sizes. The large ones have a byte beyond maxBufferedBody, so that a chunked
// body of exactly maxBufferedBody is read to its end.
var (
	smallBodies = sync.Pool{New: func() any { b := make([]byte, smallBody); return &b }}
	largeBodies = sync.Pool{New: func() any { b := make([]byte, maxBufferedBody+1); return &b }}
)

type bodyResult int

const (
	bodyRead    bodyResult = iota // the body (maybe none) is in x.body
	bodyStreams                   // part of it is in x.body, the rest is still to come
	bodyFailed                    // the client sent a malformed or truncated body, or stalled
)

// refuseBody answers a request whose body could not be read: 408 when the client stalled past the
// body timeout, a filter's status when its body reader refused the body (core.StatusError), 400
// otherwise (malformed or cut short). The connection then closes (the HTTP/1.1 server drains no further).
func (f *h1Forwarder) refuseBody(w http.ResponseWriter, r *http.Request, err error) {
	status, msg := bodyErrorStatus(err)
	f.errw.WriteError(w, r, status, msg)
}

// bodyErrorStatus is the answer to a request whose body could not be read (see refuseBody).
func bodyErrorStatus(err error) (int, string) {
	if st, ok := core.ErrorStatus(err); ok {
		return st, http.StatusText(st)
	}
	if isTimeout(err) {
		return http.StatusRequestTimeout, "request body timeout"
	}
	return http.StatusBadRequest, "malformed request body"
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// readBody reads r's body into x. A body of declared length (at most maxBufferedBody, see
// fastPathable) is read whole. A chunked one (from the own server) is read while its bytes are
// already there: if it ends within maxBufferedBody it is forwarded like a body of known length;
// if the client pauses or the body runs longer, it streams (streamBody), so a slow or long-lived
// upload is never held back.
func (x *h1Exchange) readBody(r *http.Request) (bodyResult, error) {
	if r.ContentLength == 0 {
		return bodyRead, nil
	}
	if r.ContentLength > 0 {
		buf := x.takeBody(int(r.ContentLength))
		n, err := io.ReadFull(r.Body, buf[:r.ContentLength])
		x.body = buf[:n]
		if err != nil {
			return bodyFailed, err
		}
		return bodyRead, nil // an own body read whole has armed the client watch
	}
	hb := r.Body.(*h1server.Body) // see fastPathable
	buf := x.takeBody(maxBufferedBody + 1)
	n := 0
	for {
		if n == len(buf) || !hb.Ready() {
			x.body = buf[:n]
			return bodyStreams, nil
		}
		k, err := hb.Read(buf[n:])
		n += k
		if errors.Is(err, io.EOF) {
			x.body = buf[:n]
			return bodyRead, nil
		}
		if err != nil {
			x.body = buf[:n]
			return bodyFailed, err
		}
	}
}

// takeBody takes a pooled buffer of at least n bytes (n ≤ maxBufferedBody+1).
func (x *h1Exchange) takeBody(n int) []byte {
	if n <= smallBody {
		x.bodyBuf = smallBodies.Get().(*[]byte)
	} else {
		x.bodyBuf = largeBodies.Get().(*[]byte)
	}
	return *x.bodyBuf
}

func (x *h1Exchange) putBody() {
	if x.bodyBuf != nil {
		putBodyBuf(x.bodyBuf)
	}
	x.body, x.bodyBuf = nil, nil
}

func putBodyBuf(b *[]byte) {
	if len(*b) == smallBody {
		smallBodies.Put(b)
	} else {
		largeBodies.Put(b)
	}
}

// streamBody sends a chunked body that did not arrive whole through the stdlib reverse proxy, which
// writes it while it reads the response: what was read first, then the rest.
func (f *h1Forwarder) streamBody(w http.ResponseWriter, r *http.Request, ep *core.Endpoint, x *h1Exchange) outcome {
	rb := &replayBody{head: x.body, buf: x.bodyBuf, rest: r.Body}
	x.body, x.bodyBuf = nil, nil // rb owns the buffer now
	body := r.Body
	r.Body = rb
	defer func() { r.Body = body }()
	return f.slowPath().forward(w, r, ep)
}

// replayBody reads head, then rest. The transport may read it from its own goroutine, and close
// it from another, even after the handler returned: the lock keeps the buffer from going back to
// its pool under a read of head (it is not held while rest is read, which may wait for the client).
type replayBody struct {
	mu     sync.Mutex
	head   []byte
	buf    *[]byte
	rest   io.ReadCloser
	closed bool
}

func (b *replayBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return 0, http.ErrBodyReadAfterClose
	}
	if len(b.head) > 0 {
		n := copy(p, b.head)
		b.head = b.head[n:]
		if len(b.head) == 0 {
			b.release()
		}
		b.mu.Unlock()
		return n, nil
	}
	b.mu.Unlock()
	return b.rest.Read(p)
}

func (b *replayBody) Close() error {
	b.mu.Lock()
	b.closed = true
	b.release()
	b.mu.Unlock()
	return nil
}

func (b *replayBody) release() {
	b.head = nil
	if b.buf != nil {
		putBodyBuf(b.buf)
		b.buf = nil
	}
}
