//go:build linux

package proxy_test

import (
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
)

// stuckBackend is a loopback port whose accept queue is full: Linux drops further SYNs, so a
// connect to it hangs until the dialer gives up, as with a blackholed backend.
func stuckBackend(t *testing.T) uint32 {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	port := uint32(sa.(*syscall.SockaddrInet4).Port)
	// Fill the queue (a backlog of 0 holds one connection), never accepting.
	for range 2 {
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", itoa(port)), 200*time.Millisecond)
		if err == nil {
			t.Cleanup(func() { _ = c.Close() })
		}
	}
	return port
}

func TestTCPConnectTimeout(t *testing.T) {
	l := portKeyed("TCP", 0, l4Route("route.tcp", "r", backend("stuck", 1)))
	p := newL4Proxy(t, proxy.Limits{UpstreamDialTimeout: 300 * time.Millisecond})
	apply(t, p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{l4Cluster("stuck", irv1.Cluster_TCP, stuckBackend(t))}))
	c, err := net.Dial("tcp", addrOf(t, p, l.Name))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	start := time.Now()
	b, err := io.ReadAll(c)
	if err != nil && !isReset(err) {
		t.Fatalf("want the connection closed after the connect timeout, got %v", err)
	}
	if d := time.Since(start); len(b) > 0 || d < 250*time.Millisecond || d > 5*time.Second {
		t.Fatalf("read %q, closed after %v; want nothing, after about 300ms", b, d)
	}
}
