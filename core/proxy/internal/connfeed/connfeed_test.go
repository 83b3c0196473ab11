package connfeed

import (
	"errors"
	"net"
	"testing"
)

// TestDeliverAccept: a delivered connection is the one Accept returns; after Close, Deliver
// refuses (the caller keeps the connection) and Accept fails with net.ErrClosed.
func TestDeliverAccept(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	l := New(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1})
	got := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			t.Error(err)
		}
		got <- c
	}()
	if !l.Deliver(a) {
		t.Fatal("Deliver refused an open listener")
	}
	if c := <-got; c != a {
		t.Fatalf("Accept returned %v, want the delivered connection", c)
	}
	_ = l.Close()
	_ = l.Close()
	if l.Deliver(b) {
		t.Fatal("Deliver succeeded after Close")
	}
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v, want net.ErrClosed", err)
	}
	if l.Addr().String() != "127.0.0.1:1" {
		t.Fatalf("Addr %v", l.Addr())
	}
}
