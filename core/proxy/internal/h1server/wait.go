package h1server

import (
	"errors"
	"net"
	"runtime"
	"sync"
	"syscall"
)

// readWaiter waits, without holding a read buffer, until a socket has data (or EOF, or an error)
// under its read deadline, and takes the data that is there off the socket on the way: each step
// reads into a pooled stash, which it keeps only when something came. Reading (rather than peeking
// and then reading) inside the socket's RawConn.Read, after Go's poller has begun to listen, means
// that a request already waiting costs one read(2) and a request yet to come costs an EAGAIN, the
// poller's wake-up and one read(2), as a blocking read would; a readiness the poller saw before
// the wait began is not lost, since the first step reads before waiting.
type readWaiter struct {
	nc     net.Conn
	rc     syscall.RawConn
	src    *connSource // where the data read goes
	err    error
	fn     func(uintptr) bool // step, bound once so that waiting allocates nothing
	parked bool               // the last wait found nothing at first and waited for the poller
}

// stashes are the readWaiter's read buffers: the size of the connection's reader, so that its
// first fill takes a whole stash in one copy.
var stashes = sync.Pool{New: func() any { b := make([]byte, h1ReadBufSize); return &b }}

func (w *readWaiter) init(nc net.Conn, src *connSource) {
	w.nc, w.src = nc, src
	if sc, ok := nc.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			w.rc = rc
			w.fn = w.step
		}
	}
}

func (w *readWaiter) step(fd uintptr) bool {
	b := stashes.Get().(*[]byte)
	for {
		n, err := syscall.Read(int(fd), *b)
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EAGAIN):
			stashes.Put(b)
			w.parked = true
			return false
		case err != nil:
			w.err = err
		case n <= 0:
			w.err = errReqNone
		default:
			w.src.stash, w.src.data = b, (*b)[:n]
			return true
		}
		stashes.Put(b)
		return true
	}
}

// wait returns nil once the socket has data, which is then in w.src; an error at its end or
// when the read deadline passes.
func (w *readWaiter) wait() error {
	if w.rc == nil {
		_, err := w.nc.Read(nil)
		return err
	}
	w.err, w.parked = nil, false
	if err := w.rc.Read(w.fn); err != nil {
		return err
	}
	return w.err
}

// connSource is what a connection's reader reads from: the bytes a readWaiter took off the socket,
// then the socket.
type connSource struct {
	nc    net.Conn
	stash *[]byte // holds data; nil when there is none
	data  []byte
	// waited is set when a read goes to the socket: cleared as a request arrives (conn.arrive), it
	// tells serve whether the header came with the first bytes or had to be waited for.
	waited bool
}

func (s *connSource) Read(p []byte) (int, error) {
	if s.stash == nil {
		s.waited = true
		return s.nc.Read(p)
	}
	n := copy(p, s.data)
	s.data = s.data[n:]
	if len(s.data) == 0 {
		s.release()
	}
	return n, nil
}

// pending reports whether bytes read off the socket wait in the stash.
func (s *connSource) pending() bool { return s.stash != nil }

// release returns the stash to its pool.
func (s *connSource) release() {
	if s.stash != nil {
		stashes.Put(s.stash)
		s.stash, s.data = nil, nil
	}
}

// yielder decides whether a connection yields the processor once before it waits for its next
// request. On a busy proxy the yield lets the other connections that are ready run first, and by
// the time this one reads, its client has often sent the next request: the read finds it, where
// it would have failed with EAGAIN and waited for the poller to wake the goroutine (a system call
// and a park and wake-up saved; B1 at 64 connections: 3.0 → 2.2–2.4 reads per request). On an
// idle or lightly loaded proxy the yield buys nothing, and with idle processors (GOMAXPROCS > 1)
// it costs a thread wake-up (runtime.Gosched wakes an idle P), so each connection keeps a score
// of how its yields paid lately (two up for one that paid, one down for one that did not: a
// paying yield saves several times what an idle one costs on a single P) and yields only while
// it is positive, probing every yieldProbe-th wait otherwise.
type yielder struct {
	score uint8 // how the yields paid lately, within [0, yieldMax] (after)
	waits uint8 // waits since the last probe, while score is 0
	now   bool  // this wait yielded
}

const (
	yieldMax   = 8
	yieldProbe = 16
)

// before yields, or not, before a wait.
func (y *yielder) before() {
	y.now = y.score > 0
	if !y.now {
		if y.waits++; y.waits >= yieldProbe {
			y.waits, y.now = 0, true
		}
	}
	if y.now {
		runtime.Gosched()
	}
}

// after scores the yield of the wait that just ended: parked means the request was not there.
func (y *yielder) after(parked bool) {
	switch {
	case !y.now:
	case parked && y.score > 0:
		y.score--
	case !parked:
		y.score = min(y.score+2, yieldMax)
	}
}
