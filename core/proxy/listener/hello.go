package listener

import (
	"crypto/tls"
	"errors"
	"net"

	"github.com/coxswain-labs/coxswain/core/proxy"
)

// errPeeked stops the handshake peekClientHello runs once the ClientHello is read.
var errPeeked = errors.New("ClientHello read")

// peekConfig runs crypto/tls's own ClientHello parser (record reassembly across reads and records,
// every length check) up to the point where a server would choose its configuration, and stops
// there: GetConfigForClient records the SNI and fails the handshake.
var peekConfig = &tls.Config{
	GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		rc := h.Conn.(*recordingConn)
		rc.serverName, rc.hello = h.ServerName, true
		return nil, errPeeked
	},
}

// peekClientHello reads c up to and including the first ClientHello, without writing anything
// to c. It returns the SNI ("" when the client sent none) and every byte it read, which is to be
// replayed to whoever handles the connection next. Anything that is not a TLS ClientHello (plain
// text, SSLv2, garbage) is an error, and so is a read that times out under c's deadline.
func peekClientHello(c net.Conn) (serverName string, read []byte, err error) {
	rc := &recordingConn{Conn: c}
	herr := tls.Server(rc, peekConfig).Handshake()
	if !rc.hello {
		if herr == nil {
			herr = errors.New("handshake ended without a ClientHello")
		}
		return "", nil, herr
	}
	return rc.serverName, rc.read, nil
}

// recordingConn keeps what is read from the connection and swallows what the TLS stack would
// write (the alert it sends when peeking stops the handshake).
type recordingConn struct {
	net.Conn
	read       []byte
	serverName string
	hello      bool
}

func (c *recordingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.read = append(c.read, b[:n]...)
	return n, err
}

func (c *recordingConn) Write(b []byte) (int, error) { return len(b), nil }

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
