//go:build linux

package proxy_test

import (
	"context"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
	"github.com/coxswain-labs/coxswain/core/proxy/internal/testmod"
	"github.com/coxswain-labs/coxswain/core/proxy/listener"
	"github.com/coxswain-labs/coxswain/modules/lb/roundrobin"
	"github.com/coxswain-labs/coxswain/modules/tcproute"
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

// TestL4UpstreamErrorSeries connects through three TCPRoutes whose backends fail the connect in
// the three ways a real one does on loopback: a closed port (refused), a port whose accept queue
// is full (the connect timeout) and a plain TCP server behind upstream TLS (the handshake). Each
// is counted in coxswain_proxy_upstream_errors_total under its Gateway, route object, backend
// and reason, as the HTTP routes' failures are.
func TestL4UpstreamErrorSeries(t *testing.T) {
	echo := newTCPEcho(t, "plain") // speaks no TLS: the upstream handshake fails
	reg := prometheus.NewRegistry()
	mods := append(testmod.Modules(), &roundrobin.RoundRobin{}, &listener.TCP{}, &tcproute.Route{})
	p := proxy.New(proxy.Options{Log: testLogger(), Registry: core.NewRegistry(mods...), Metrics: reg, RequestMetrics: true,
		Limits: proxy.Limits{UpstreamDialTimeout: 300 * time.Millisecond}})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = p.Close(ctx)
	})
	tlsCluster := l4Cluster("tls", irv1.Cluster_TCP, echo.port)
	tlsCluster.Tls = &irv1.UpstreamTLS{ServerName: "db.example"}
	var listeners []*irv1.Listener
	for i, name := range []string{"refused", "stuck", "tls"} {
		l := portKeyed("TCP", 0, l4Route("route.tcp", "TCPRoute/ns/"+name+"/rule/0/match/0", backend(name, 1)))
		l.Address = "127.0.0." + itoa(uint32(i+1)) // one socket each (port 0 would be one socket)
		l.Name = l.Address + ":0/TCP"
		l.Servers[0].Sources = []string{"ns/gw/" + name}
		listeners = append(listeners, l)
	}
	apply(t, p, snapshot(t, listeners, []*irv1.Cluster{
		l4Cluster("refused", irv1.Cluster_TCP, closedPort(t)),
		l4Cluster("stuck", irv1.Cluster_TCP, stuckBackend(t)),
		tlsCluster,
	}))
	if text := gatherText(t, reg); strings.Contains(text, "coxswain_proxy_upstream_errors_total") {
		t.Fatalf("upstream error series before any connection:\n%s", text)
	}
	for _, l := range listeners {
		c, err := net.Dial("tcp", addrOf(t, p, l.Name))
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if b, _ := io.ReadAll(c); len(b) > 0 {
			t.Errorf("%s: read %q from a backend that could not be reached", l.Name, b)
		}
		_ = c.Close()
	}
	text := gatherText(t, reg)
	for name, reason := range map[string]string{"refused": "connect_refused", "stuck": "connect_timeout", "tls": "connect_tls"} {
		want := `coxswain_proxy_upstream_errors_total{backend="` + name + `"gateway="ns/gw"reason="` + reason + `"route="TCPRoute/ns/` + name + `"} 1`
		if !strings.Contains(text, want) {
			t.Errorf("no %s in\n%s", want, text)
		}
	}
	if n := strings.Count(text, "coxswain_proxy_upstream_errors_total{"); n != 3 {
		t.Errorf("%d upstream error series, want 3:\n%s", n, text)
	}
}
