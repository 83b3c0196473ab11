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

// errBadServerName fails a handshake whose SNI is not a DNS host name.
var errBadServerName = errors.New("SNI is not a DNS host name")

// validServerName reports whether a ClientHello's SNI ("" when none) is one a route could name:
// RFC 6066 §3 host names are ASCII DNS names, so any other byte (NUL, space, CR, 8-bit, '/'),
// an empty label or an overlong name is a client probing for a parser that lets it through,
// refused before a server is chosen by it or it reaches a log line. '_' is let through: real
// host names carry it.
func validServerName(name string) bool {
	if len(name) > 253 {
		return false
	}
	label := 0
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c == '.':
			if label == 0 {
				return false
			}
			label = 0
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
			label++
			if label > 63 {
				return false
			}
		default:
			return false
		}
	}
	return name == "" || label > 0
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
