package proxy_test

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
)

// udpEcho is a UDP backend answering "<name> <client port> <payload>", so a reply says which
// backend answered and from which upstream socket the proxy sent.
func newUDPEcho(t testing.TB, name string) uint32 {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			port := from.(*net.UDPAddr).Port
			_, _ = pc.WriteTo(fmt.Appendf(nil, "%s %d %s", name, port, buf[:n]), from)
		}
	}()
	return portOf(t, pc.LocalAddr().String())
}

// udpAsk sends payload from c to the proxy and returns the reply's fields; the reply must come
// from the proxy's address.
func udpAsk(t testing.TB, c *net.UDPConn, proxyAddr *net.UDPAddr, payload string) (backend, upstreamPort, echoed string) {
	t.Helper()
	backend, upstreamPort, echoed, err := udpTry(c, proxyAddr, payload)
	if err != nil {
		t.Fatal(err)
	}
	return backend, upstreamPort, echoed
}

// udpTry is udpAsk for other goroutines than the test's.
func udpTry(c *net.UDPConn, proxyAddr *net.UDPAddr, payload string) (backend, upstreamPort, echoed string, err error) {
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.WriteToUDP([]byte(payload), proxyAddr); err != nil {
		return "", "", "", err
	}
	buf := make([]byte, 64<<10)
	n, from, err := c.ReadFromUDP(buf)
	if err != nil {
		return "", "", "", fmt.Errorf("no reply to %q: %w", payload, err)
	}
	if from.String() != proxyAddr.String() {
		return "", "", "", fmt.Errorf("reply from %s, want the listener's address %s", from, proxyAddr)
	}
	f := strings.SplitN(string(buf[:n]), " ", 3)
	if len(f) != 3 {
		return "", "", "", fmt.Errorf("reply %q", buf[:n])
	}
	return f[0], f[1], f[2], nil
}

func udpClient(t testing.TB) *net.UDPConn {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestUDPRoute(t *testing.T) {
	a, b := newUDPEcho(t, "a"), newUDPEcho(t, "b")
	l := portKeyed("UDP", 0,
		l4Route("route.udp", "older", backend("a", 1), backend("b", 1)),
		l4Route("route.udp", "newer", backend("b", 1)))
	clusters := []*irv1.Cluster{l4Cluster("a", irv1.Cluster_UDP, a), l4Cluster("b", irv1.Cluster_UDP, b)}
	p := newL4Proxy(t, proxy.Limits{UDPSessionTimeout: 300 * time.Millisecond, UDPMaxSessions: 1000})
	apply(t, p, snapshot(t, []*irv1.Listener{l}, clusters))
	paddr, err := net.ResolveUDPAddr("udp", addrOf(t, p, l.Name))
	if err != nil {
		t.Fatal(err)
	}

	t.Run("many clients, each pinned to one backend and upstream socket", func(t *testing.T) {
		const clients, rounds = 64, 20
		var mu sync.Mutex
		perBackend := map[string]int{}
		var wg sync.WaitGroup
		for i := range clients {
			c := udpClient(t)
			wg.Add(1)
			go func() {
				defer wg.Done()
				first, firstPort, _, err := udpTry(c, paddr, "hello")
				if err != nil {
					t.Error(err)
					return
				}
				for r := range rounds {
					msg := fmt.Sprintf("client %d round %d", i, r)
					be, port, echoed, err := udpTry(c, paddr, msg)
					if err != nil || be != first || port != firstPort || echoed != msg {
						t.Errorf("client %d round %d: %s/%s %q (%v), want pinned to %s/%s", i, r, be, port, echoed, err, first, firstPort)
						return
					}
				}
				mu.Lock()
				perBackend[first]++
				mu.Unlock()
			}()
		}
		wg.Wait()
		// Both backends of the oldest route share the clients by weight; the newer route gets none.
		if perBackend["a"] != clients/2 || perBackend["b"] != clients/2 {
			t.Errorf("sessions per backend %v, want %d each", perBackend, clients/2)
		}
	})
	t.Run("idle sessions are evicted", func(t *testing.T) {
		eventually(t, "every session evicted", func() bool {
			st := p.ListenerStats()[l.Name]
			return st["udp_sessions"] == 0 && st["udp_sessions_evicted"] >= 64
		})
		// A client coming back after eviction gets a new session (a new upstream socket).
		c := udpClient(t)
		_, port1, _ := udpAsk(t, c, paddr, "x")
		eventually(t, "the session evicted", func() bool { return p.ListenerStats()[l.Name]["udp_sessions"] == 0 })
		_, port2, _ := udpAsk(t, c, paddr, "y")
		if port1 == port2 {
			t.Errorf("same upstream port %s after eviction", port1)
		}
	})
}

func TestUDPSessionCap(t *testing.T) {
	a := newUDPEcho(t, "a")
	l := portKeyed("UDP", 0, l4Route("route.udp", "r", backend("a", 1)))
	p := newL4Proxy(t, proxy.Limits{UDPSessionTimeout: time.Minute, UDPMaxSessions: 4})
	apply(t, p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{l4Cluster("a", irv1.Cluster_UDP, a)}))
	paddr, _ := net.ResolveUDPAddr("udp", addrOf(t, p, l.Name))
	for range 4 {
		udpAsk(t, udpClient(t), paddr, "in")
	}
	c := udpClient(t)
	for range 3 {
		_, _ = c.WriteToUDP([]byte("flood"), paddr)
	}
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, _, err := c.ReadFromUDP(make([]byte, 100)); err == nil {
		t.Fatalf("a client beyond the cap got a reply (%d bytes)", n)
	}
	st := p.ListenerStats()[l.Name]
	if st["udp_sessions"] != 4 || st["udp_datagrams_dropped_cap"] != 3 {
		t.Fatalf("stats %v, want 4 sessions and 3 datagrams dropped", st)
	}
}

// TestTCPAndUDPOnOnePort binds a TCP and a UDP listener on the same port number: different
// sockets, each with its own route kind.
func TestTCPAndUDPOnOnePort(t *testing.T) {
	ta, ua := newTCPEcho(t, "tcp"), newUDPEcho(t, "udp")
	port := closedPort(t)
	p := newL4Proxy(t, proxy.Limits{})
	apply(t, p, snapshot(t, []*irv1.Listener{
		portKeyed("TCP", port, l4Route("route.tcp", "t", backend("t", 1))),
		portKeyed("UDP", port, l4Route("route.udp", "u", backend("u", 1))),
	}, []*irv1.Cluster{l4Cluster("t", irv1.Cluster_TCP, ta.port), l4Cluster("u", irv1.Cluster_UDP, ua)}))
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port)))
	if g := greeting(t, addr); g != "tcp" {
		t.Errorf("TCP greeting %q", g)
	}
	paddr, _ := net.ResolveUDPAddr("udp", addr)
	if be, _, _ := udpAsk(t, udpClient(t), paddr, "x"); be != "udp" {
		t.Errorf("UDP backend %q", be)
	}
}

// TestL4RouteOnTheWrongListener: a snapshot pairing a listener with the wrong kind of route is
// rejected whole, before anything is bound.
func TestL4RouteOnTheWrongListener(t *testing.T) {
	cases := []struct {
		name string
		l    *irv1.Listener
		c    *irv1.Cluster
		want string
	}{
		{"UDP route on TCP", portKeyed("TCP", 0, l4Route("route.udp", "r", backend("c", 1))), l4Cluster("c", irv1.Cluster_UDP, 1), "core.DatagramRoute"},
		{"TCP route on UDP", portKeyed("UDP", 0, l4Route("route.tcp", "r", backend("c", 1))), l4Cluster("c", irv1.Cluster_TCP, 1), "core.StreamRoute"},
		{"TCP route on HTTP", httpListener(0, server("", vhost("", l4Route("route.tcp", "r", backend("c", 1))))), l4Cluster("c", irv1.Cluster_TCP, 1), "core.StreamRoute"},
		{"HTTP route on TCP", portKeyed("TCP", 0, route("r", "/", backend("c", 1))), cluster("c"), "core.HTTPMatcher"},
		{"TCP route to a UDP cluster", portKeyed("TCP", 0, l4Route("route.tcp", "r", backend("c", 1))), l4Cluster("c", irv1.Cluster_UDP, 1), "speaks UDP"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newL4Proxy(t, proxy.Limits{})
			err := p.Apply(context.Background(), snapshot(t, []*irv1.Listener{tc.l}, []*irv1.Cluster{tc.c}))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Apply: %v, want an error mentioning %q", err, tc.want)
			}
			if len(p.Bound()) != 0 {
				t.Errorf("bound %v after a rejected snapshot", p.Bound())
			}
		})
	}
}

// TestUDPFloodIsBounded sends one datagram from each of many new source addresses: the session
// table, its upstream sockets and its goroutines stop growing at the cap, and the rest is counted.
func TestUDPFloodIsBounded(t *testing.T) {
	const maxSessions, sources = 50, 600
	a := newUDPEcho(t, "a")
	l := portKeyed("UDP", 0, l4Route("route.udp", "r", backend("a", 1)))
	p := newL4Proxy(t, proxy.Limits{UDPSessionTimeout: time.Minute, UDPMaxSessions: maxSessions})
	apply(t, p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{l4Cluster("a", irv1.Cluster_UDP, a)}))
	paddr, _ := net.ResolveUDPAddr("udp", addrOf(t, p, l.Name))
	before := runtime.NumGoroutine()
	// In batches the listener socket's receive buffer always holds: 600 datagrams at once can
	// overflow it on a loaded machine, and a datagram the kernel drops is never accounted for.
	const batch = 50
	for sent := 0; sent < sources; {
		for range batch {
			c := udpClient(t)
			if _, err := c.WriteToUDP([]byte("flood"), paddr); err != nil {
				t.Fatal(err)
			}
			sent++
		}
		eventually(t, "every datagram accounted for", func() bool {
			st := p.ListenerStats()[l.Name]
			return st["udp_sessions_opened"]+st["udp_datagrams_dropped_cap"] == int64(sent)
		})
	}
	st := p.ListenerStats()[l.Name]
	if st["udp_sessions"] != maxSessions || st["udp_datagrams_dropped_cap"] != sources-maxSessions {
		t.Fatalf("stats %v, want %d sessions and %d drops", st, maxSessions, sources-maxSessions)
	}
	// One relay goroutine per session, none per dropped client (slack for the runtime's own).
	if grown := runtime.NumGoroutine() - before; grown > maxSessions+10 {
		t.Errorf("%d more goroutines for %d sessions", grown, maxSessions)
	}
}
