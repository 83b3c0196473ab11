package proxy

import (
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

// The cause of a reset seen by a client whose connection was never used: closing a listener
// resets the connections still in its accept queue. acceptBacklog takes them first, and closing
// one of those sends a clean FIN.
func TestAcceptBacklogSavesQueuedConnectionsFromReset(t *testing.T) {
	queued := func(t *testing.T) (net.Listener, net.Conn) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		c, err := net.Dial("tcp", ln.Addr().String()) // completes in the kernel; nobody accepts
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		return ln, c
	}

	t.Run("closing the listener resets it", func(t *testing.T) {
		ln, c := queued(t)
		_ = ln.Close()
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("read after the listener closed: %v, want ECONNRESET (the kernel's behaviour this works around)", err)
		}
	})

	t.Run("taken from the backlog it closes cleanly", func(t *testing.T) {
		ln, c := queued(t)
		conns := acceptBacklog(ln)
		_ = ln.Close()
		if len(conns) != 1 {
			t.Fatalf("acceptBacklog took %d connections, want 1", len(conns))
		}
		if _, ok := conns[0].(*net.TCPConn); !ok {
			t.Errorf("taken connection is a %T, want *net.TCPConn", conns[0])
		}
		if got, want := conns[0].RemoteAddr().String(), c.LocalAddr().String(); got != want {
			t.Errorf("taken connection from %s, want %s", got, want)
		}
		_ = conns[0].Close()
		if _, err := c.Read(make([]byte, 1)); err != io.EOF { //nolint:errorlint // io.EOF is returned unwrapped
			t.Fatalf("read after close: %v, want EOF", err)
		}
	})

	t.Run("an empty queue returns at once", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		if conns := acceptBacklog(ln); len(conns) != 0 {
			t.Fatalf("took %d connections from an empty queue", len(conns))
		}
	})
}
