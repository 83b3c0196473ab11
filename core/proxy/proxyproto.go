package proxy

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"

	proxyproto "github.com/pires/go-proxyproto"
	"go.uber.org/zap"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// proxyProtocol is a listener's PROXY protocol requirement (irv1.ProxyProtocol): the versions a
// connection's header may have.
type proxyProtocol struct{ v1, v2 bool }

func proxyProtocolOf(p *irv1.ProxyProtocol) *proxyProtocol {
	if p == nil {
		return nil
	}
	pp := &proxyProtocol{v1: p.GetV1(), v2: p.GetV2()}
	if !pp.v1 && !pp.v2 {
		pp.v1, pp.v2 = true, true
	}
	return pp
}

// maxV2Header bounds a v2 header's address block and TLVs (the length field allows 64 KiB). The
// library enforces the same bound (proxyproto.MaxV2HeaderSize, 4 KiB by default); checking it
// here too refuses a long header before reading any of it.
const maxV2Header = 4096

// v1 headers are at most 107 bytes, CRLF included (the spec's worst case, TCP6 with ports).
const maxV1Header = 107

var (
	sigV1 = []byte("PROXY ")
	sigV2 = []byte("\r\n\r\n\x00\r\nQUIT\n")

	errNoProxyHeader    = errors.New("no PROXY protocol header")
	errProxyVersion     = errors.New("PROXY protocol version not accepted on this listener")
	errProxyHeaderLarge = errors.New("PROXY protocol header too long")
	errProxyNotTCP      = errors.New("PROXY protocol needs a TCP connection")
)

// proxiedConn is a connection whose client came in its PROXY protocol header. It is the
// accepted *net.TCPConn with another RemoteAddr: the header was consumed exactly, nothing past
// it was read, so the socket's own methods (readiness polling, splice, half-close) stay correct.
type proxiedConn struct {
	*net.TCPConn
	remote *net.TCPAddr
	conn   net.Conn // as accepted: closing it frees the connection's place under the cap
}

func (c *proxiedConn) RemoteAddr() net.Addr { return c.remote }

func (c *proxiedConn) Close() error { return c.conn.Close() }

// NetTCPConn returns the socket, for splice(2) (see core.TCPConnOf).
func (c *proxiedConn) NetTCPConn() *net.TCPConn { return c.TCPConn }

// acceptProxied reads c's PROXY header and hands the connection on as the header's client. It
// runs on a goroutine of its own, never on the accept loop, so a slow header holds up nothing
// but itself, for the header timeout at most.
func (s *socket) acceptProxied(c net.Conn, pp proxyProtocol) {
	pc, err := readProxyHeader(c, pp, Positive(s.limits.ProxyProtocolHeaderTimeout))
	if err != nil {
		s.proxyRejected.Add(1)
		if ce := s.log.Check(zap.DebugLevel, "connection dropped"); ce != nil {
			ce.Write(zap.String("listener", s.name), zap.Stringer("peer", c.RemoteAddr()),
				zap.String("reason", "PROXY protocol"), zap.Error(err))
		}
		_ = c.Close()
		return
	}
	s.deliver(pc)
}

// readProxyHeader consumes c's PROXY protocol header, within timeout, and returns c with the
// header's source as its RemoteAddr (c itself for a LOCAL header, a health check by the proxy in
// front, or one whose addresses are not IP).
func readProxyHeader(c net.Conn, pp proxyProtocol, timeout time.Duration) (net.Conn, error) {
	tc, ok := core.TCPConnOf(c)
	if !ok {
		return nil, errProxyNotTCP
	}
	if timeout > 0 {
		if err := tc.SetReadDeadline(time.Now().Add(timeout)); err != nil {
			return nil, err
		}
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return nil, err
	}
	buf, err := peekProxyHeader(raw, pp)
	if err != nil {
		return nil, err
	}
	// Consume exactly the header: the bytes after it stay in the socket for the server.
	if _, err := readFull(tc, buf); err != nil {
		return nil, err
	}
	if timeout > 0 {
		if err := tc.SetReadDeadline(time.Time{}); err != nil {
			return nil, err
		}
	}
	src, err := proxySource(buf)
	if err != nil {
		return nil, err
	}
	if src == nil {
		return c, nil
	}
	return &proxiedConn{TCPConn: tc, remote: src, conn: c}, nil
}

// proxySource parses a whole PROXY protocol header (as peekProxyHeader framed it) and returns the
// client it names: nil for a LOCAL header (a health check by the proxy in front) or one whose
// addresses are not IP (UNKNOWN, a Unix socket), whose connection keeps its own address.
func proxySource(buf []byte) (*net.TCPAddr, error) {
	h, err := proxyproto.Read(bufio.NewReaderSize(bytes.NewReader(buf), max(len(buf), 16)))
	if err != nil {
		return nil, err
	}
	if h.Command.IsLocal() {
		return nil, nil
	}
	switch a := h.SourceAddr.(type) {
	case *net.TCPAddr:
		return a, nil
	case *net.UDPAddr:
		return &net.TCPAddr{IP: a.IP, Port: a.Port, Zone: a.Zone}, nil
	}
	return nil, nil
}

func readFull(c net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := c.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// peekProxyHeader waits, with MSG_PEEK, until the socket holds a whole header, and returns a
// buffer of its exact length (not yet read). It fails as soon as the bytes cannot begin an
// accepted header, so a client that sends none (an HTTP request, a TLS ClientHello) is refused
// at its first segment rather than at the timeout.
func peekProxyHeader(raw syscall.RawConn, pp proxyProtocol) ([]byte, error) {
	buf := make([]byte, 256)
	seen := 0
	for {
		n, err := peekMore(raw, buf, seen)
		if err != nil {
			return nil, err
		}
		seen = n
		total, err := proxyHeaderLen(buf[:n], pp)
		switch {
		case err != nil:
			return nil, err
		case total > 0 && total <= n:
			return buf[:total], nil
		case total > len(buf):
			buf = append(buf, make([]byte, total-len(buf))...)
		}
	}
}

// peekMore peeks into buf until the socket holds more than seen bytes (or buf is full), waiting
// on the poller under the read deadline. A peek that returns no more than last time waits for
// the next readiness: new bytes on a socket wake the poller again.
func peekMore(raw syscall.RawConn, buf []byte, seen int) (int, error) {
	var n int
	var perr error
	err := raw.Read(func(fd uintptr) bool {
		m, _, e := syscall.Recvfrom(int(fd), buf, syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case errors.Is(e, syscall.EAGAIN) || errors.Is(e, syscall.EINTR):
			return false
		case e != nil:
			perr = e
		case m == 0:
			perr = fmt.Errorf("%w: connection closed after %d bytes", errNoProxyHeader, seen)
		case m <= seen && m < len(buf):
			return false
		}
		n = m
		return true
	})
	if err != nil {
		return 0, err
	}
	return n, perr
}

// proxyHeaderLen is the length of the header b begins: 0 when b is too short to tell, an error
// when b cannot begin a header of an accepted version.
func proxyHeaderLen(b []byte, pp proxyProtocol) (int, error) {
	switch {
	case hasPrefixOrIs(b, sigV1):
		if !pp.v1 {
			return 0, fmt.Errorf("%w: v1", errProxyVersion)
		}
		if len(b) < len(sigV1) {
			return 0, nil
		}
		if i := bytes.IndexByte(b[:min(len(b), maxV1Header)], '\n'); i >= 0 {
			return i + 1, nil
		}
		if len(b) >= maxV1Header {
			return 0, fmt.Errorf("%w: v1 without CRLF in %d bytes", errProxyHeaderLarge, maxV1Header)
		}
		return 0, nil
	case hasPrefixOrIs(b, sigV2):
		if !pp.v2 {
			return 0, fmt.Errorf("%w: v2", errProxyVersion)
		}
		if len(b) < 16 {
			return 0, nil
		}
		l := int(binary.BigEndian.Uint16(b[14:16]))
		if l > maxV2Header {
			return 0, fmt.Errorf("%w: v2 of %d bytes (at most %d)", errProxyHeaderLarge, l, maxV2Header)
		}
		return 16 + l, nil
	}
	return 0, errNoProxyHeader
}

// hasPrefixOrIs reports whether b begins with sig, or is a beginning of it.
func hasPrefixOrIs(b, sig []byte) bool {
	n := min(len(b), len(sig))
	return n > 0 && bytes.Equal(b[:n], sig[:n])
}
