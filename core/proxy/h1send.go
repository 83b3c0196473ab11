package proxy

import (
	"errors"
	"net"
	"os"
	"syscall"
)

// sendWaiter is what an upstream connection's bufio.Writer writes to. Armed for the last write of a
// request (roundTrip), it sends the bytes and waits for the socket to become readable in one step:
// the write happens inside the socket's RawConn.Read, after Go's poller has started listening for
// readiness, so the response's arrival is never missed and the read that follows finds it. A plain
// write followed by a read almost always costs a read(2) that returns EAGAIN first (the upstream has
// not answered microseconds after the request left), then the wait; this saves that system call on
// every request (it is what nginx does: it reads an upstream socket only once epoll says so).
//
// Anything that arrived before the wait began (an upstream that closed an idle connection) is not
// seen by the wait, but the request written to such a socket is answered by a reset, which is. A
// write that cannot complete at once (a full socket buffer) or a wait that cannot start (a deadline
// already past) falls back to the connection's ordinary, deadline-bound Write. TLS connections
// (no raw socket) always write the ordinary way.
type sendWaiter struct {
	nc    net.Conn
	rc    syscall.RawConn // nil: write to nc only
	armed bool            // the next Write is a request's last: send it and wait for readability
	fn    func(uintptr) bool

	// One armed Write's state, for step.
	p    []byte
	n    int
	err  error
	sent bool
}

func (s *sendWaiter) init(nc net.Conn) {
	s.nc = nc
	if _, plain := nc.(*net.TCPConn); !plain {
		return
	}
	if rc, err := nc.(syscall.Conn).SyscallConn(); err == nil {
		s.rc, s.fn = rc, s.step
	}
}

func (s *sendWaiter) Write(p []byte) (int, error) {
	if !s.armed || s.rc == nil {
		return s.nc.Write(p)
	}
	s.armed = false
	s.p, s.n, s.err, s.sent = p, 0, nil, false
	// The wait's own error (a deadline, a cancellation's past deadline) is not the write's: the
	// read that follows reports it.
	_ = s.rc.Read(s.fn)
	n, err := s.n, s.err
	s.p = nil
	if err != nil || n == len(p) {
		return n, err
	}
	m, err := s.nc.Write(p[n:])
	return n + m, err
}

// step runs under the socket's read lock: first it writes (false: sent whole, wait), then, called
// again once the poller reports the socket readable, it ends the wait (a stale report only makes the
// next read wait as usual).
func (s *sendWaiter) step(fd uintptr) bool {
	if s.sent {
		return true
	}
	s.sent = true
	for s.n < len(s.p) {
		n, err := syscall.Write(int(fd), s.p[s.n:])
		if n > 0 {
			s.n += n
		}
		switch {
		case err == nil && n <= 0:
			return true // nothing taken: the ordinary way
		case err == nil:
		case errors.Is(err, syscall.EINTR):
		case errors.Is(err, syscall.EAGAIN):
			return true // the rest goes the ordinary way
		default:
			s.err = os.NewSyscallError("write", err)
			return true
		}
	}
	return false
}
