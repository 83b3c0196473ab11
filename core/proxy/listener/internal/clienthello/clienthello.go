// Package clienthello reads a TLS ClientHello off a connection without answering it: the SNI
// for choosing a route, and the bytes read, to be replayed to whoever serves the connection.
// It is its own package so that its fuzz target builds a small binary (the coverage the fuzzer
// tracks over the whole listener package made each new input take seconds).
package clienthello

import (
	"crypto/tls"
	"errors"
	"net"
)

// errPeeked stops the handshake Peek runs once the ClientHello is read.
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

// Peek reads c up to and including the first ClientHello, without writing anything
// to c. It returns the SNI ("" when the client sent none) and every byte it read, which is to be
// replayed to whoever handles the connection next. Anything that is not a TLS ClientHello (plain
// text, SSLv2, garbage) is an error, and so is a read that times out under c's deadline.
func Peek(c net.Conn) (serverName string, read []byte, err error) {
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

// ErrBadServerName fails a handshake whose SNI is not a DNS host name.
var ErrBadServerName = errors.New("SNI is not a DNS host name")

// ValidServerName reports whether a ClientHello's SNI ("" when none) is one a route could name:
// RFC 6066 §3 host names are ASCII DNS names, so any other byte (NUL, space, CR, 8-bit, '/'),
// an empty label or an overlong name is a client probing for a parser that lets it through,
// refused before a server is chosen by it or it reaches a log line. '_' is let through: real
// host names carry it.
func ValidServerName(name string) bool {
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
