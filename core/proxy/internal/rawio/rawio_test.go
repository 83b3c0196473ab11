package rawio

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { _ = client.Close(); _ = server.Close() })
	return client, server
}

// TestRoundTrip writes more than the socket buffers hold (so writes wait for the reader, and reads
// wait for the writer) and checks every byte arrives in order, then the end of the stream.
func TestRoundTrip(t *testing.T) {
	client, server := tcpPair(t)
	var w Writer
	w.Init(client)
	var r Reader
	r.Init(server)
	if w.rc == nil || r.rc == nil {
		t.Fatal("a TCP connection must take the raw path")
	}
	want := make([]byte, 8<<20)
	for i := range want {
		want[i] = byte(i * 7)
	}
	done := make(chan error, 1)
	go func() {
		n, err := w.Write(want)
		if err == nil && n != len(want) {
			err = io.ErrShortWrite
		}
		if err == nil {
			err = client.(*net.TCPConn).CloseWrite()
		}
		done <- err
	}()
	got, err := io.ReadAll(&r)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("write: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, not the %d written (or not in order)", len(got), len(want))
	}
	if n, err := r.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("after the end: %d, %v; want 0, EOF", n, err)
	}
}

// TestReadDeadline: a read with nothing to read waits under the read deadline and reports a
// timeout as net.Conn's Read does.
func TestReadDeadline(t *testing.T) {
	_, server := tcpPair(t)
	var r Reader
	r.Init(server)
	_ = server.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	n, err := r.Read(make([]byte, 16))
	var ne net.Error
	if n != 0 || !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %d, %v; want a timeout", n, err)
	}
}

// TestWriteDeadline: a write the peer never reads waits under the write deadline, reports a
// timeout, and counts what the socket took.
func TestWriteDeadline(t *testing.T) {
	client, _ := tcpPair(t)
	var w Writer
	w.Init(client)
	_ = client.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	n, err := w.Write(make([]byte, 64<<20))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write past the deadline: %v; want a timeout", err)
	}
	if n <= 0 || n >= 64<<20 {
		t.Fatalf("wrote %d bytes; want some but not all", n)
	}
}

// TestReset: a peer that resets the connection shows as ECONNRESET in an error shaped like
// net.Conn's (the forwarder's stale-connection retry asks errors.Is).
func TestReset(t *testing.T) {
	client, server := tcpPair(t)
	_ = server.(*net.TCPConn).SetLinger(0)
	_ = server.Close()
	var r Reader
	r.Init(client)
	_, err := r.Read(make([]byte, 16))
	var op *net.OpError
	if !errors.Is(err, syscall.ECONNRESET) || !errors.As(err, &op) || op.Op != "read" {
		t.Fatalf("read after a reset: %v; want a read OpError with ECONNRESET", err)
	}
	var w Writer
	w.Init(client)
	if _, err := w.Write([]byte("x")); err == nil || !errors.As(err, &op) {
		t.Fatalf("write after a reset: %v; want an OpError", err)
	}
}

// TestClosed: reading or writing a closed connection is net.ErrClosed, as with net.Conn.
func TestClosed(t *testing.T) {
	client, _ := tcpPair(t)
	var r Reader
	r.Init(client)
	var w Writer
	w.Init(client)
	_ = client.Close()
	if _, err := r.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read of a closed connection: %v", err)
	}
	if _, err := w.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write of a closed connection: %v", err)
	}
}

// TestNotRaw: a connection without a raw socket (net.Pipe here, a TLS connection in use) is read
// and written through its own methods.
func TestNotRaw(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	var w Writer
	w.Init(a)
	var r Reader
	r.Init(b)
	if w.rc != nil || r.rc != nil {
		t.Fatal("net.Pipe has no raw socket")
	}
	go func() { _, _ = w.Write([]byte("hello")) }()
	buf := make([]byte, 5)
	if _, err := io.ReadFull(&r, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("read %q, %v", buf, err)
	}
}
