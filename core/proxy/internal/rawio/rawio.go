// Package rawio reads and writes the HTTP/1.1 legs' sockets with raw system calls
// (syscall.RawSyscall) inside syscall.RawConn.Read and Write, in place of net.Conn's Read and
// Write.
//
// Why: net.Conn makes each read(2) and write(2) through syscall.Syscall, which tells the Go
// scheduler that the goroutine may block in the kernel (entersyscall, exitsyscall). A socket the
// runtime polls is non-blocking: the call never sleeps, so that bookkeeping buys nothing, and it
// costs more than its own few dozen nanoseconds: the first such call after the process was idle
// wakes the runtime's monitor thread (sysmon) from its deep sleep, which then ticks every 20 µs
// for a millisecond or more, and a call the kernel preempts for longer than a tick gets its P
// handed to another thread. A proxy with one P that goes idle between bursts of requests pays
// that over and over. The waiting is unchanged: RawConn.Read and Write wait for readiness in Go's
// poller under the socket's deadlines, exactly as net.Conn's Read and Write do.
//
// Under the race detector the ordinary calls are used instead (rawio_race.go): they tell the
// detector that a write happens before the read that sees its bytes, which tests whose client and
// server share a process rely on.
package rawio

import (
	"io"
	"net"
	"os"
	"syscall"
)

// Reader reads one socket. The zero value, or one whose connection has no raw socket (TLS), reads
// through the connection's own Read.
type Reader struct {
	nc  net.Conn
	rc  syscall.RawConn
	fn  func(uintptr) bool // step, bound once so that a read allocates nothing
	p   []byte
	n   int
	err error
}

// Init binds r to nc: raw reads when nc is a TCP socket (anything with a syscall.RawConn that is
// not a TLS connection: TLS does not implement syscall.Conn), nc.Read otherwise.
func (r *Reader) Init(nc net.Conn) {
	r.nc, r.rc, r.fn = nc, rawConn(nc), nil
	if r.rc != nil {
		r.fn = r.step
	}
}

// Read reads into p as net.Conn's Read does: it waits under the read deadline until something
// can be read, and returns io.EOF at the end of the stream.
func (r *Reader) Read(p []byte) (int, error) {
	if r.rc == nil || len(p) == 0 {
		return r.nc.Read(p)
	}
	r.p, r.n, r.err = p, 0, nil
	err := r.rc.Read(r.fn)
	n, serr := r.n, r.err
	r.p, r.err = nil, nil
	switch {
	case serr != nil:
		return n, opError("read", r.nc, serr)
	case err != nil:
		return n, err
	}
	return n, nil
}

func (r *Reader) step(fd uintptr) bool {
	for {
		n, errno := read(fd, r.p)
		switch errno {
		case 0:
			if n == 0 {
				r.err = io.EOF
			}
			r.n = n
			return true
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			r.err = errno
			return true
		}
	}
}

// Writer writes one socket. The zero value, or one whose connection has no raw socket (TLS),
// writes through the connection's own Write.
type Writer struct {
	nc  net.Conn
	rc  syscall.RawConn
	fn  func(uintptr) bool // step, bound once so that a write allocates nothing
	p   []byte
	n   int
	err error
}

// Init binds w to nc, as Reader.Init.
func (w *Writer) Init(nc net.Conn) {
	w.nc, w.rc, w.fn = nc, rawConn(nc), nil
	if w.rc != nil {
		w.fn = w.step
	}
}

// Write writes all of p as net.Conn's Write does: waiting under the write deadline whenever the
// socket's buffer is full.
func (w *Writer) Write(p []byte) (int, error) {
	if w.rc == nil {
		return w.nc.Write(p)
	}
	w.p, w.n, w.err = p, 0, nil
	err := w.rc.Write(w.fn)
	n, serr := w.n, w.err
	w.p, w.err = nil, nil
	switch {
	case serr != nil:
		return n, opError("write", w.nc, serr)
	case err != nil:
		return n, err
	}
	return n, nil
}

func (w *Writer) step(fd uintptr) bool {
	for w.n < len(w.p) {
		n, errno := write(fd, w.p[w.n:])
		switch errno {
		case 0:
			w.n += n
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			w.err = errno
			return true
		}
	}
	return true
}

// Read and Write are one raw read(2) and write(2) on fd, for callers already inside a
// RawConn's Read or Write (EINTR is the caller's to retry). Under the race detector they are
// the ordinary calls.
func Read(fd uintptr, p []byte) (int, syscall.Errno) { return read(fd, p) }

func Write(fd uintptr, p []byte) (int, syscall.Errno) { return write(fd, p) }

func rawConn(nc net.Conn) syscall.RawConn {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}

// opError wraps a system call's error as net.Conn's Read and Write do, so that callers asking
// errors.Is(err, syscall.ECONNRESET) or printing it see the same.
func opError(op string, nc net.Conn, errno error) error {
	if errno == io.EOF { //nolint:errorlint // set by step, never wrapped
		return io.EOF
	}
	return &net.OpError{Op: op, Net: nc.LocalAddr().Network(), Source: nc.LocalAddr(), Addr: nc.RemoteAddr(),
		Err: os.NewSyscallError(op, errno)}
}
