package proxy

import (
	"errors"
	"net"
	"os"
	"syscall"
)

// acceptBacklog takes, without waiting, the connections the kernel has completed on ln that no
// one has accepted yet. Closing a listening socket resets those: Linux sends an RST for every
// connection left in its accept queue, so a client whose connect() returned just before the
// listener closed (net/http's Transport keeps such spare connections) would read "connection
// reset" instead of the clean close an unused connection gets. Connections that complete after
// this returns and before the socket is closed are still reset; nothing but closing stops the
// kernel from completing handshakes.
func acceptBacklog(ln net.Listener) []net.Conn {
	sc, ok := ln.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	var conns []net.Conn
	// Control, not Read: Read would wait for the next connection once the queue is empty. The
	// listening socket is non-blocking (Go's), so accept4 answers EAGAIN then.
	_ = rc.Control(func(lfd uintptr) {
		for {
			fd, _, err := syscall.Accept4(int(lfd), syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC)
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			if err != nil {
				return // EAGAIN: the queue is empty; anything else: nothing more to take
			}
			if c := fileConn(fd); c != nil {
				conns = append(conns, c)
			}
		}
	})
	return conns
}

// fileConn makes a net.Conn of an accepted socket (a *net.TCPConn for TCP, so that splice and
// readiness polling work on it as on any accepted connection).
func fileConn(fd int) net.Conn {
	f := os.NewFile(uintptr(fd), "accepted")
	defer f.Close() // FileConn holds its own duplicate
	c, err := net.FileConn(f)
	if err != nil {
		return nil
	}
	return c
}
