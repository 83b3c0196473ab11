package proxy_test

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"testing"
	"time"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
)

// TestTLSRoute serves one TLS port carrying passthrough and terminating servers (the mixed
// mode), and checks for each SNI which backend answered and which certificate the client saw.
func TestTLSRoute(t *testing.T) {
	pa, pb := newTLSEcho(t, "pass-a"), newTLSEcho(t, "pass-b")
	ta, tb := newTCPEcho(t, "term-a"), newTCPEcho(t, "term-b")
	clusters := []*irv1.Cluster{
		l4Cluster("pa", irv1.Cluster_TCP, pa.port), l4Cluster("pb", irv1.Cluster_TCP, pb.port),
		l4Cluster("ta", irv1.Cluster_TCP, ta.port), l4Cluster("tb", irv1.Cluster_TCP, tb.port),
	}
	secrets := []*irv1.Secret{
		secret(t, "ns/term", "listener-term", "term.example.com"),
		secret(t, "ns/wild", "listener-wild", "*.term.org"),
	}
	tr := func(name, cluster string) *irv1.Route { return l4Route("route.tls", name, backend(cluster, 1)) }
	terminate := func(host, sec string, vhosts ...*irv1.VirtualHost) *irv1.Server {
		return tlsServer(host, []string{sec}, vhosts...)
	}
	l := l4Listener("TLS", 0,
		// Passthrough server for *.example.com: an exact route and a wildcard one.
		passthroughServer("*.example.com",
			vhost("a.example.com", tr("exact", "pa")),
			vhost("*.example.com", tr("wild", "pb"))),
		// Terminating servers: an exact one and a wildcard one.
		terminate("term.example.com", "ns/term", vhost("term.example.com", tr("term", "ta"))),
		terminate("*.term.org", "ns/wild", vhost("*.term.org", tr("wildterm", "tb"))),
	)
	catchAllPort := closedPort(t)
	catchAll := l4Listener("TLS", catchAllPort,
		passthroughServer("", vhost("", tr("any", "pa"))),
		passthroughServer("b.example.com", vhost("b.example.com", tr("b", "pb"))))
	// The default handshake timeout: a dribbled ClientHello and a terminating handshake can take
	// long on a loaded -race run. TestTLSHelloTimeout tests a short one.
	p := newL4Proxy(t, proxy.Limits{})
	apply(t, p, snapshot(t, []*irv1.Listener{l, catchAll}, clusters, secrets...))
	addr, addr2 := addrOf(t, p, l.Name), addrOf(t, p, catchAll.Name)

	cases := []struct {
		name, addr, sni  string
		wantCN, wantLine string // wantCN "" means the connection must be dropped
	}{
		{"passthrough exact", addr, "a.example.com", "pass-a", "pass-a a.example.com"},
		{"passthrough wildcard", addr, "b.example.com", "pass-b", "pass-b b.example.com"},
		{"passthrough wildcard, several labels", addr, "x.y.example.com", "pass-b", "pass-b x.y.example.com"},
		{"SNI is case-insensitive", addr, "A.Example.COM", "pass-a", "pass-a A.Example.COM"},
		{"terminate exact", addr, "term.example.com", "listener-term", "term-a"},
		{"terminate wildcard", addr, "deep.sub.term.org", "listener-wild", "term-b"},
		{"an unknown SNI is dropped", addr, "other.net", "", ""},
		{"no SNI without a catch-all is dropped", addr, "", "", ""},
		{"no SNI takes the catch-all", addr2, "", "pass-a", "pass-a "},
		{"unknown SNI takes the catch-all", addr2, "c.example.com", "pass-a", "pass-a c.example.com"},
		{"exact server before the catch-all", addr2, "b.example.com", "pass-b", "pass-b b.example.com"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cn, line, err := tlsGreeting(tc.addr, tc.sni, nil)
			if tc.wantCN == "" {
				if err == nil {
					t.Fatalf("connection served by %q (%q), want it dropped", cn, line)
				}
				return
			}
			if err != nil {
				t.Fatalf("SNI %q: %v", tc.sni, err)
			}
			if cn != tc.wantCN || line != tc.wantLine {
				t.Fatalf("certificate %q line %q, want %q %q", cn, line, tc.wantCN, tc.wantLine)
			}
		})
	}

	t.Run("a ClientHello split across packets", func(t *testing.T) {
		for _, sni := range []string{"a.example.com", "term.example.com"} {
			cn, line, err := tlsGreeting(addr, sni, func(c net.Conn) net.Conn { return &dribbleConn{Conn: c} })
			if err != nil || cn == "" || line == "" {
				t.Fatalf("SNI %s: cn %q line %q err %v", sni, cn, line, err)
			}
		}
	})
	t.Run("garbage is dropped", func(t *testing.T) {
		expectDropped(t, addr, []byte("GET / HTTP/1.1\r\nHost: a.example.com\r\n\r\n"), 10*time.Second)
	})
	t.Run("dropped connections are counted", func(t *testing.T) {
		// unknown SNI, no SNI, garbage.
		eventually(t, "drops counted", func() bool {
			return p.ListenerStats()[l.Name]["stream_connections_dropped"] == 3
		})
	})
	t.Run("the passthrough stream is spliced both ways", func(t *testing.T) {
		raw, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		_ = raw.SetDeadline(time.Now().Add(30 * time.Second))
		c := tls.Client(raw, &tls.Config{ServerName: "a.example.com", InsecureSkipVerify: true})
		buf := make([]byte, len("pass-a a.example.com\n"))
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatal(err)
		}
		payload := make([]byte, 4<<20)
		go func() { _, _ = c.Write(payload) }()
		if _, err := io.ReadFull(c, payload); err != nil {
			t.Fatalf("echo through passthrough: %v", err)
		}
	})
}

// TestTLSHelloTimeout: a client that sends half a ClientHello, or nothing, is dropped once the
// handshake timeout is over, not before, and within a generous bound after it.
func TestTLSHelloTimeout(t *testing.T) {
	const timeout = 500 * time.Millisecond
	pa := newTLSEcho(t, "pass-a")
	l := l4Listener("TLS", 0, passthroughServer("a.example.com", vhost("a.example.com", l4Route("route.tls", "r", backend("pa", 1)))))
	p := newL4Proxy(t, proxy.Limits{TLSHandshakeTimeout: timeout})
	apply(t, p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{l4Cluster("pa", irv1.Cluster_TCP, pa.port)}))
	addr := addrOf(t, p, l.Name)

	t.Run("half a ClientHello times out", func(t *testing.T) {
		hello := clientHelloBytes(t, "a.example.com")
		expectTimedOut(t, addr, hello[:len(hello)/2], timeout)
	})
	t.Run("silence times out", func(t *testing.T) {
		expectTimedOut(t, addr, nil, timeout)
	})
	t.Run("dropped connections are counted", func(t *testing.T) {
		eventually(t, "drops counted", func() bool {
			return p.ListenerStats()[l.Name]["stream_connections_dropped"] == 2
		})
	})
}

// expectDropped sends b (or nothing) and expects the proxy to close the connection within limit
// without sending a byte.
func expectDropped(t *testing.T, addr string, b []byte, limit time.Duration) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(limit))
	if len(b) > 0 {
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	got, err := io.ReadAll(c)
	if err != nil && !isReset(err) {
		t.Fatalf("want the connection closed, got %v", err)
	}
	if len(got) > 0 {
		t.Fatalf("proxy answered %q", got)
	}
}

// expectTimedOut is expectDropped for a drop by a timeout: no sooner than timeout after the dial,
// and within a generous bound after it.
func expectTimedOut(t *testing.T, addr string, b []byte, timeout time.Duration) {
	t.Helper()
	start := time.Now() // the proxy's clock starts after the accept
	expectDropped(t, addr, b, timeout+10*time.Second)
	if d := time.Since(start); d < timeout {
		t.Fatalf("dropped after %v, before the %v timeout", d, timeout)
	}
}

// clientHelloBytes captures the first flight of a TLS client for sni.
func clientHelloBytes(t *testing.T, sni string) []byte {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	go func() {
		_ = tls.Client(a, &tls.Config{ServerName: sni, InsecureSkipVerify: true}).Handshake()
	}()
	_ = b.SetDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64<<10)
	n, err := b.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	_ = b.Close()
	return buf[:n]
}

// dribbleConn writes a few bytes at a time with pauses, so a ClientHello reaches the proxy in
// many TCP segments.
type dribbleConn struct {
	net.Conn
	writes int
}

func (c *dribbleConn) Write(b []byte) (int, error) {
	c.writes++
	if c.writes > 1 { // only the first flight is dribbled
		return c.Conn.Write(b)
	}
	for i := 0; i < len(b); i += 7 {
		end := min(i+7, len(b))
		if _, err := c.Conn.Write(b[i:end]); err != nil {
			return i, err
		}
		time.Sleep(time.Millisecond)
	}
	return len(b), nil
}

// TestTLSTerminateIdle: the idle timeout on a terminated stream (copied through buffers, with read
// deadlines on the TLS connection) keeps a trickle and cuts silence.
func TestTLSTerminateIdle(t *testing.T) {
	const idle = 300 * time.Millisecond
	be := newTCPEcho(t, "term")
	l := l4Listener("TLS", 0, tlsServer("t.example.com", []string{"ns/t"}, vhost("t.example.com", l4Route("route.tls", "r", backend("b", 1)))))
	p := newL4Proxy(t, proxy.Limits{StreamIdleTimeout: idle})
	apply(t, p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{l4Cluster("b", irv1.Cluster_TCP, be.port)},
		secret(t, "ns/t", "t", "t.example.com")))
	dial := func() (net.Conn, *bufio.Reader, error) {
		c, err := tls.Dial("tcp", addrOf(t, p, l.Name), &tls.Config{ServerName: "t.example.com", InsecureSkipVerify: true})
		if err != nil {
			return nil, nil, err
		}
		return greeted(c, "term")
	}
	t.Run("a trickle keeps the connection", func(t *testing.T) {
		trickleOutlivesIdle(t, idle, dial)
	})
	t.Run("silence closes it", func(t *testing.T) {
		silenceIsCut(t, idle, dial)
	})
}
