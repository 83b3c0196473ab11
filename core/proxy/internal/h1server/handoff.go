package h1server

import (
	"errors"
	"net"
	"syscall"
	"time"
)

// HTTP/2 connections arrive here first (the TLS handshake's ALPN, or the cleartext preface is
// seen on the connection's first bytes) and are handed to the HTTP/2 server: the engine's own,
// which serves a connection in the calling goroutine, or net/http's, which accepts from a
// handoff listener.

func (s *Server) hasH2() bool { return s.h2 != nil || s.h2own != nil }

// serveOwnH2 serves a connection that speaks HTTP/2 on the own server, in this goroutine. A
// cleartext connection's buffered preface is read again through its reader.
func (c *conn) serveOwnH2(nc net.Conn) {
	if rc, ok := nc.(*replayConn); ok {
		c.srv.h2own.ServeConn(rc.Conn, rc.r)
		return
	}
	c.srv.h2own.ServeConn(nc, nil)
}

// aLongTimeAgo is a deadline in the past: setting it unblocks a read or write at once.
var aLongTimeAgo = time.Unix(1, 0)

func isConnReset(err error) bool { return errors.Is(err, syscall.ECONNRESET) }
