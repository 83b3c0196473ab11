package clienthello

import (
	"bytes"
	"net"
	"testing"
	"time"
)

// memConn is a net.Conn that reads a fixed first flight and discards writes.
type memConn struct {
	net.Conn // nil: only the methods below are called
	r        bytes.Reader
}

func (c *memConn) Read(b []byte) (int, error)       { return c.r.Read(b) }
func (c *memConn) Write(b []byte) (int, error)      { return len(b), nil }
func (c *memConn) SetDeadline(time.Time) error      { return nil }
func (c *memConn) SetReadDeadline(time.Time) error  { return nil }
func (c *memConn) SetWriteDeadline(time.Time) error { return nil }
func (c *memConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *memConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *memConn) Close() error                     { return nil }

// BenchmarkPeekClientHello is the per-connection cost listener.tls adds before passing a
// connection through: parsing a real crypto/tls ClientHello for its SNI.
func BenchmarkPeekClientHello(b *testing.B) {
	hello := clientHello(b, "a.example.com")
	b.ReportAllocs()
	b.SetBytes(int64(len(hello)))
	var c memConn
	for range b.N {
		c.r.Reset(hello)
		sni, _, err := Peek(&c)
		if err != nil || sni != "a.example.com" {
			b.Fatal(sni, err)
		}
	}
}
