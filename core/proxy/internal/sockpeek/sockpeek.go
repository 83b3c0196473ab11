// Package sockpeek asks a socket, without waiting and without consuming anything, whether it
// has data or has ended: a MSG_PEEK of one byte inside syscall.RawConn.Read. Both HTTP/1.1 legs
// use it: the server to tell whether more of a request body is there, the upstream pool whether
// an idle connection is still open and silent.
package sockpeek

import (
	"errors"
	"io"
	"syscall"
)

// Peek peeks at one socket. The zero value has no socket: Init it first.
type Peek struct {
	rc   syscall.RawConn
	fn   func(uintptr) bool // step, bound once so that a peek allocates nothing
	data bool
	err  error
}

// Init binds p to rc.
func (p *Peek) Init(rc syscall.RawConn) {
	p.rc, p.fn = rc, p.step
}

// Initialized reports whether p has a socket.
func (p *Peek) Initialized() bool { return p.rc != nil }

func (p *Peek) step(fd uintptr) bool {
	var b [1]byte
	for {
		n, _, e := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case errors.Is(e, syscall.EINTR):
			continue
		case errors.Is(e, syscall.EAGAIN):
		case e != nil:
			p.err = e
		case n == 0:
			p.err = io.EOF
		default:
			p.data = true
		}
		return true
	}
}

// Ready reports, without waiting, whether the socket has data to read.
func (p *Peek) Ready() bool {
	return p.check() && p.data
}

// Silent reports whether the socket is open with nothing to read (true when p has no socket: it
// cannot tell).
func (p *Peek) Silent() bool {
	if p.rc == nil {
		return true
	}
	return p.check() && !p.data && p.err == nil
}

// check peeks; false when the socket cannot be asked.
func (p *Peek) check() bool {
	p.data, p.err = false, nil
	return p.rc != nil && p.rc.Read(p.fn) == nil
}
