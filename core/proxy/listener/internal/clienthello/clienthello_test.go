package clienthello

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// clientHello is the first flight of a real crypto/tls client.
func clientHello(t testing.TB, sni string) []byte {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	go func() { _ = tls.Client(a, &tls.Config{ServerName: sni, InsecureSkipVerify: true}).Handshake() }()
	_ = b.SetDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64<<10)
	n, err := b.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	_ = b.Close()
	return buf[:n]
}

// peek runs Peek on a connection that delivers input and then EOF.
func peek(input []byte) (string, []byte, error) {
	return Peek(&bytesConn{r: bytes.NewReader(input)})
}

// bytesConn is a net.Conn that reads its input and discards writes, with no goroutine or
// deadline per input.
type bytesConn struct {
	net.Conn // nil: only the methods below are called
	r        *bytes.Reader
}

func (c *bytesConn) Read(b []byte) (int, error)       { return c.r.Read(b) }
func (c *bytesConn) Write(b []byte) (int, error)      { return len(b), nil }
func (c *bytesConn) Close() error                     { return nil }
func (c *bytesConn) SetDeadline(time.Time) error      { return nil }
func (c *bytesConn) SetReadDeadline(time.Time) error  { return nil }
func (c *bytesConn) SetWriteDeadline(time.Time) error { return nil }
func (c *bytesConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *bytesConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }

func TestPeekClientHello(t *testing.T) {
	hello := clientHello(t, "a.example.com")
	noSNI := clientHello(t, "")
	cases := []struct {
		name    string
		input   []byte
		wantSNI string
		wantErr bool
	}{
		{"a ClientHello", hello, "a.example.com", false},
		{"no SNI", noSNI, "", false},
		{"truncated", hello[:len(hello)-10], "", true},
		{"only the record header", hello[:5], "", true},
		{"plain HTTP", []byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n"), "", true},
		{"nothing", nil, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sni, read, err := peek(tc.input)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if sni != tc.wantSNI {
				t.Errorf("SNI %q, want %q", sni, tc.wantSNI)
			}
			if string(read) != string(tc.input) {
				t.Errorf("recorded %d bytes, want the %d sent (to replay them)", len(read), len(tc.input))
			}
		})
	}
}

// FuzzPeekClientHello: whatever the first flight, the peek returns (no panic, no hang) and what
// it records is a prefix of what was sent.
func FuzzPeekClientHello(f *testing.F) {
	f.Add(clientHello(f, "a.example.com"))
	f.Add([]byte{0x16, 0x03, 0x01, 0x00, 0x05, 0x01, 0x00, 0x00, 0x01, 0x00})
	f.Add([]byte("\x16\x03\x01\xff\xff"))
	f.Fuzz(func(t *testing.T, in []byte) {
		_, read, err := peek(in)
		if err != nil && !errors.Is(err, io.EOF) && read != nil {
			t.Fatalf("error %v with recorded bytes", err)
		}
		if len(read) > len(in) || string(read) != string(in[:len(read)]) {
			t.Fatalf("recorded bytes are not a prefix of the input")
		}
	})
}

func TestValidServerName(t *testing.T) {
	for name, want := range map[string]bool{
		"": true, "a": true, "example.com": true, "A-b_c.example.com": true, "xn--bcher-kva.example": true,
		"a\x00b": false, "a b": false, "a\xffb": false, "a\r\nb": false, "a/b": false, "...": false,
		".a": false, "a..b": false, "a.": false, "*.example.com": false,
		strings.Repeat("a", 64) + ".com": false, strings.Repeat("a.", 127) + "aa": false,
	} {
		if got := ValidServerName(name); got != want {
			t.Errorf("ValidServerName(%q) = %v, want %v", name, got, want)
		}
	}
}
