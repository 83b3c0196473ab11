package sockpeek

import (
	"net"
	"syscall"
	"testing"
	"time"
)

// TestPeek checks the three states a peek tells apart on a real loopback connection: silent,
// data waiting (which the peek leaves there), and ended by the peer.
func TestPeek(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	rc, err := server.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var p Peek
	if !p.Silent() || p.Initialized() {
		t.Fatal("a Peek without a socket must say silent and uninitialized")
	}
	p.Init(rc)
	if p.Ready() || !p.Silent() {
		t.Fatal("an idle connection is not silent")
	}
	if _, err := client.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	await(t, "data", p.Ready)
	if p.Silent() {
		t.Fatal("silent with a byte waiting")
	}
	buf := make([]byte, 2)
	if n, err := server.Read(buf); n != 1 || err != nil || buf[0] != 'x' {
		t.Fatalf("read %d %q %v: the peek must leave the byte in place", n, buf[:n], err)
	}
	_ = client.Close()
	await(t, "end of stream", func() bool { return !p.Silent() })
	if p.Ready() {
		t.Fatal("ready at end of stream")
	}
}

// await polls cond: the bytes cross loopback asynchronously, and a peek never waits.
func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 5 s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
