package listener

import (
	"net"

	"github.com/coxswain-labs/coxswain/core/proxy"
)

// replayConn is a connection whose first bytes were already read: they are read again first. It
// also carries the route the connection was selected for, for the certificate callback.
type replayConn struct {
	net.Conn
	buf    []byte
	target *proxy.StreamTarget
}

func (c *replayConn) Read(b []byte) (int, error) {
	if len(c.buf) > 0 {
		n := copy(b, c.buf)
		c.buf = c.buf[n:]
		return n, nil
	}
	return c.Conn.Read(b)
}
