// Package connfeed is a net.Listener fed by hand: an accept loop (the engine's socket) or a
// protocol sniffer (the HTTP/1.1 server handing HTTP/2 connections to net/http's server)
// delivers connections that a server's Serve then accepts.
package connfeed

import (
	"net"
	"sync"
)

// Listener is a net.Listener whose connections come from Deliver. Its address may be set until
// a server first serves it (SetAddr), for servers made before the socket they serve is known.
type Listener struct {
	addr net.Addr
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

// New makes a Listener reporting addr (which may be nil until SetAddr).
func New(addr net.Addr) *Listener {
	return &Listener{addr: addr, ch: make(chan net.Conn), done: make(chan struct{})}
}

// SetAddr sets the address Addr reports; call it before the Listener is served.
func (l *Listener) SetAddr(addr net.Addr) { l.addr = addr }

// Accept waits for a delivered connection; net.ErrClosed once closed.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Deliver hands c to the server's Accept, waiting for it; false once the Listener is closed
// (the caller still owns c then). A closed Listener refuses even when an Accept is waiting.
func (l *Listener) Deliver(c net.Conn) bool {
	select {
	case <-l.done:
		return false
	default:
	}
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		return false
	}
}

// Close makes Accept and Deliver fail; it may be called more than once.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

// Addr is the address given to New or SetAddr.
func (l *Listener) Addr() net.Addr { return l.addr }
