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
	// Pinning is under test here, not eviction (TestUDPSessionTimeout): a session timeout no
	// stall of a loaded -race run reaches, so no round trip outlives its session.
	p := newL4Proxy(t, proxy.Limits{UDPSessionTimeout: time.Minute, UDPMaxSessions: 1000})
	apply(t, p, snapshot(t, []*irv1.Listener{l}, clusters))
	paddr, err := net.ResolveUDPAddr("udp", addrOf(t, p, l.Name))
	if err != nil {
		t.Fatal(err)
	}

	const clients, rounds = 64, 20
	var mu sync.Mutex
	perBackend := map[string]int{}
	var wg sync.WaitGroup
	for i := range clients {
		c := udpClient(t)
		wg.Go(func() {
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
		})
	}
	wg.Wait()
	// Both backends of the oldest route share the clients by weight; the newer route gets none.
	if perBackend["a"] != clients/2 || perBackend["b"] != clients/2 {
		t.Errorf("sessions per backend %v, want %d each", perBackend, clients/2)
	}
	if st := p.ListenerStats()[l.Name]; st["udp_sessions"] != clients || st["udp_sessions_opened"] != clients {
		t.Errorf("stats %v, want one session per client, all open", st)
	}
}

// TestUDPSessionTimeout checks the session timeout from both sides: traffic keeps a session, and an
// idle one is evicted, never before its time and within a generous bound after it. The timeout is
// the thing tested, so it stays short; a loaded -race run can still stall a client or the proxy
// past it, so a session that ends is judged by the time since the client's last datagram that the
// proxy certainly handled (a reply came back): the proxy's clock for the session started no
// earlier, so an end sooner than the timeout after it is the product's fault, and a later one is a
// stall this test cannot tell from a correct eviction.
func TestUDPSessionTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	a := newUDPEcho(t, "a")
	l := portKeyed("UDP", 0, l4Route("route.udp", "r", backend("a", 1)))
	p := newL4Proxy(t, proxy.Limits{UDPSessionTimeout: timeout})
	apply(t, p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{l4Cluster("a", irv1.Cluster_UDP, a)}))
	paddr, err := net.ResolveUDPAddr("udp", addrOf(t, p, l.Name))
	if err != nil {
		t.Fatal(err)
	}
	stat := func(name string) int64 { return p.ListenerStats()[l.Name][name] }

	t.Run("traffic keeps a session", func(t *testing.T) {
		const rounds, attempts = 12, 5 // a datagram every 100ms: four timeouts
		for attempt := 1; ; attempt++ {
			c := udpClient(t)
			lastSent := time.Now()
			_, port, _ := udpAsk(t, c, paddr, "first")
			kept := true
			for r := range rounds {
				time.Sleep(100 * time.Millisecond) // the pace of the traffic under test
				sent := time.Now()
				_, p2, _, err := udpTry(c, paddr, "more")
				if err == nil && p2 == port {
					lastSent = sent
					continue
				}
				since := time.Since(lastSent)
				if since < timeout {
					t.Fatalf("round %d: session ended (%s, upstream port %s, was %s) %v after the last datagram, before the %v timeout",
						r, errOr(err), p2, port, since, timeout)
				}
				t.Logf("attempt %d round %d: session ended %v after the last datagram: stalled past the timeout", attempt, r, since)
				kept = false
				break
			}
			if kept {
				return
			}
			if attempt == attempts {
				t.Fatalf("stalled past the session timeout on all %d attempts", attempts)
			}
		}
	})
	t.Run("an idle session is evicted in time", func(t *testing.T) {
		eventually(t, "the earlier sessions evicted", func() bool { return stat("udp_sessions") == 0 })
		const clients = 8
		evicted, opened := stat("udp_sessions_evicted"), stat("udp_sessions_opened")
		conns := make([]*net.UDPConn, clients)
		var lastSent time.Time
		for i := range conns {
			conns[i] = udpClient(t)
			lastSent = time.Now()
			udpAsk(t, conns[i], paddr, "x")
		}
		// The first sessions may already be gone; the last one is not, unless evicted early.
		eventually(t, "every session evicted", func() bool {
			if stat("udp_sessions") > 0 {
				return false
			}
			if since := time.Since(lastSent); since < timeout {
				t.Fatalf("every session evicted %v after the last datagram, before the %v timeout", since, timeout)
			}
			return true
		})
		if got := stat("udp_sessions_evicted") - evicted; got != clients {
			t.Errorf("%d sessions evicted, want %d", got, clients)
		}
		// A client coming back after eviction gets a new session, with a new upstream socket.
		udpAsk(t, conns[0], paddr, "y")
		if got := stat("udp_sessions_opened") - opened; got != clients+1 {
			t.Errorf("%d sessions opened, want %d: the returning client did not get a new session", got, clients+1)
		}
	})
}

func errOr(err error) string {
	if err != nil {
		return err.Error()
	}
	return "a reply from another upstream socket"
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
	// The read loop may not have reached the flood yet on a loaded machine: await its verdict.
	eventually(t, "the flood handled", func() bool {
		return p.ListenerStats()[l.Name]["udp_datagrams_dropped_cap"] >= 3
	})
	st := p.ListenerStats()[l.Name]
	if st["udp_sessions"] != 4 || st["udp_datagrams_dropped_cap"] != 3 {
		t.Fatalf("stats %v, want 4 sessions and 3 datagrams dropped", st)
	}
	// Dropped, so never forwarded: no reply can be on its way.
	_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, _, err := c.ReadFromUDP(make([]byte, 100)); err == nil {
		t.Fatalf("a client beyond the cap got a reply (%d bytes)", n)
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
