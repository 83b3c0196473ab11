package proxy_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	proxyproto "github.com/pires/go-proxyproto"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
	"github.com/coxswain-labs/coxswain/core/proxy/internal/testmod"
	"github.com/coxswain-labs/coxswain/core/proxy/listener"
	"github.com/coxswain-labs/coxswain/modules/filters/ipaccess"
	"github.com/coxswain-labs/coxswain/modules/filters/ratelimit"
	"github.com/coxswain-labs/coxswain/modules/lb/hash"
	"github.com/coxswain-labs/coxswain/modules/lb/roundrobin"
	"github.com/coxswain-labs/coxswain/modules/tcproute"
	"github.com/coxswain-labs/coxswain/modules/tlsroute"
)

// newClientProxy is a proxy with every listener and the per-client modules (IpAccessControl,
// RateLimit, hash balancing), the real ones.
func newClientProxy(t testing.TB, limits proxy.Limits) *proxy.Proxy {
	t.Helper()
	mods := append(testmod.Modules(), &roundrobin.RoundRobin{}, &hash.Hash{}, &listener.HTTP{},
		&listener.HTTPS{}, &listener.TCP{}, &listener.TLS{}, &tcproute.Route{}, &tlsroute.Route{},
		(*ipaccess.IpAccessControl)(nil), (*ratelimit.RateLimit)(nil))
	p := proxy.New(proxy.Options{Log: testLogger(), Registry: core.NewRegistry(mods...), Limits: limits})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

// ppHeader is a PROXY protocol header of version v from the client src (to 192.0.2.1:443).
func ppHeader(t testing.TB, v byte, src string) []byte {
	t.Helper()
	ap, err := net.ResolveTCPAddr("tcp", src)
	if err != nil {
		t.Fatal(err)
	}
	h := proxyproto.HeaderProxyFromAddrs(v, ap, &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 443})
	b, err := h.Format()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ppClient is a client of addr whose every connection opens with hdr (none when nil).
func ppClient(addr string, hdr []byte, https bool) *client {
	var c *client
	c = newClient(addr, func(tr *http.Transport) {
		d := &net.Dialer{Timeout: 5 * time.Second}
		dial := func(ctx context.Context, network, _ string) (net.Conn, error) {
			c.dials.Add(1)
			c, err := d.DialContext(ctx, network, addr)
			if err != nil || hdr == nil {
				return c, err
			}
			if _, err := c.Write(hdr); err != nil {
				_ = c.Close()
				return nil, err
			}
			return c, nil
		}
		tr.DialContext = dial
		if https {
			tr.DialTLSContext = func(ctx context.Context, network, a string) (net.Conn, error) {
				c, err := dial(ctx, network, a)
				if err != nil {
					return nil, err
				}
				tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true, ServerName: "example.com", NextProtos: []string{"h2", "http/1.1"}})
				if err := tc.HandshakeContext(ctx); err != nil {
					_ = c.Close()
					return nil, err
				}
				return tc, nil
			}
			tr.ForceAttemptHTTP2 = true
		}
	})
	return c
}

func withPP(l *irv1.Listener, v1, v2 bool) *irv1.Listener {
	l.ProxyProtocol = &irv1.ProxyProtocol{V1: v1, V2: v2}
	return l
}

// TestProxyProtocolHTTP: a listener that requires the PROXY protocol takes the client from v1
// and v2 headers (the backend's X-Forwarded-For says so, for every request of a keep-alive
// connection), and closes connections without a header, with a version it does not accept, or
// whose header is too slow, counting them.
func TestProxyProtocolHTTP(t *testing.T) {
	be := newBackend(t, "be", nil)
	both := withPP(httpListener(0, server("", vhost("", route("r", "/", backend("be", 1))))), false, false)
	v1only := withPP(httpListener(closedPort(t), server("", vhost("", route("r", "/", backend("be", 1))))), true, false)
	p := newClientProxy(t, proxy.Limits{ProxyProtocolHeaderTimeout: 300 * time.Millisecond})
	apply(t, p, snapshot(t, []*irv1.Listener{both, v1only}, []*irv1.Cluster{cluster("be", be)}))
	addr, addr1 := addrOf(t, p, both.Name), addrOf(t, p, v1only.Name)

	for _, tc := range []struct {
		name string
		v    byte
		src  string
	}{
		{"v1 IPv4", 1, "203.0.113.7:4711"},
		{"v2 IPv4", 2, "203.0.113.8:4711"},
		{"v1 IPv6", 1, "[2001:db8::7]:4711"},
		{"v2 IPv6", 2, "[2001:db8::8]:4711"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ppClient(addr, ppHeader(t, tc.v, tc.src), false)
			want, _, _ := net.SplitHostPort(tc.src)
			for i := range 3 {
				r := must(t, c.get("http://example.com/x", "X-Forwarded-For", "198.51.100.1"))
				if r.status != 200 || r.header.Get("X-Got-XFF") != "198.51.100.1, "+want {
					t.Fatalf("request %d: status %d, backend saw X-Forwarded-For %q; want 198.51.100.1, %s",
						i, r.status, r.header.Get("X-Got-XFF"), want)
				}
			}
			if n := c.dials.Load(); n != 1 {
				t.Errorf("%d connections for 3 keep-alive requests", n)
			}
		})
	}

	req := []byte("GET / HTTP/1.1\r\nHost: example.com\r\n\r\n")
	t.Run("no header", func(t *testing.T) { expectDropped(t, addr, req, 5*time.Second) })
	t.Run("v2 on a v1 listener", func(t *testing.T) {
		expectDropped(t, addr1, append(ppHeader(t, 2, "203.0.113.7:1"), req...), 5*time.Second)
	})
	t.Run("v1 on a v1 listener", func(t *testing.T) {
		r := must(t, ppClient(addr1, ppHeader(t, 1, "203.0.113.9:1"), false).get("http://example.com/"))
		if r.header.Get("X-Got-XFF") != "203.0.113.9" {
			t.Fatalf("backend saw %q", r.header.Get("X-Got-XFF"))
		}
	})
	t.Run("malformed v1", func(t *testing.T) {
		expectDropped(t, addr, []byte("PROXY TCP4 not-an-ip 192.0.2.1 1 2\r\n"), 5*time.Second)
	})
	t.Run("v1 without CRLF", func(t *testing.T) {
		expectDropped(t, addr, []byte("PROXY TCP4 "+strings.Repeat("1", 120)), 5*time.Second)
	})
	t.Run("slow header", func(t *testing.T) {
		start := time.Now()
		hdr := ppHeader(t, 2, "203.0.113.7:1")
		expectDropped(t, addr, hdr[:10], 5*time.Second)
		if d := time.Since(start); d < 250*time.Millisecond {
			t.Fatalf("closed after %v, before the header timeout", d)
		}
	})
	if n := p.ListenerStats()[both.Name]["proxy_protocol_rejected"]; n != 4 {
		t.Errorf("proxy_protocol_rejected = %d on %s, want 4", n, both.Name)
	}
}

// TestProxyProtocolSlowHeaderDoesNotBlockAccept: a client that never finishes its header does not
// hold up the next connection.
func TestProxyProtocolSlowHeaderDoesNotBlockAccept(t *testing.T) {
	be := newBackend(t, "be", nil)
	l := withPP(httpListener(0, server("", vhost("", route("r", "/", backend("be", 1))))), false, false)
	p := newClientProxy(t, proxy.Limits{ProxyProtocolHeaderTimeout: time.Minute})
	apply(t, p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{cluster("be", be)}))
	addr := addrOf(t, p, l.Name)
	for range 3 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, _ = c.Write([]byte("PROXY TCP4 "))
	}
	r := must(t, ppClient(addr, ppHeader(t, 1, "203.0.113.7:1"), false).get("http://example.com/"))
	if r.status != 200 {
		t.Fatalf("status %d", r.status)
	}
}

// TestForgedProxyHeaderWithoutPolicy: on listeners that do not require the PROXY protocol a
// header is bytes: an HTTP listener refuses it as a malformed request (it is never the client),
// a TCP listener passes it to the backend.
func TestForgedProxyHeaderWithoutPolicy(t *testing.T) {
	be := newBackend(t, "be", nil)
	echo := newTCPEcho(t, "echo")
	hl := httpListener(0, server("", vhost("", route("r", "/", backend("be", 1)))))
	tl := portKeyed("TCP", closedPort(t), l4Route("route.tcp", "t", backend("echo", 1)))
	p := newClientProxy(t, proxy.Limits{})
	apply(t, p, snapshot(t, []*irv1.Listener{hl, tl},
		[]*irv1.Cluster{cluster("be", be), l4Cluster("echo", irv1.Cluster_TCP, echo.port)}))

	r := ppClient(addrOf(t, p, hl.Name), ppHeader(t, 1, "203.0.113.7:1"), false).get("http://example.com/")
	if r.err == nil && (r.status < 400 || strings.Contains(r.header.Get("X-Got-XFF"), "203.0.113.7")) {
		t.Fatalf("a forged header was served: status %d, backend saw X-Forwarded-For %q", r.status, r.header.Get("X-Got-XFF"))
	}

	c, err := net.Dial("tcp", addrOf(t, p, tl.Name))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	hdr := ppHeader(t, 1, "203.0.113.7:1")
	if _, err := c.Write(hdr); err != nil {
		t.Fatal(err)
	}
	_ = c.(*net.TCPConn).CloseWrite()
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if want := "echo\n" + string(hdr) + "echo saw EOF\n"; string(got) != want {
		t.Fatalf("backend relayed %q, want %q", got, want)
	}
}

// TestProxyProtocolTLSAndTCP: the header comes before TLS on HTTPS and TLS (passthrough and
// terminate) listeners and before the stream on TCP ones; the bytes after it are the client's,
// the header never reaches the backend, and a connection without one is closed.
func TestProxyProtocolTLSAndTCP(t *testing.T) {
	be := newBackend(t, "be", nil)
	pass, term, echo := newTLSEcho(t, "pass"), newTCPEcho(t, "term"), newTCPEcho(t, "echo")
	sec := secret(t, "ns/cert", "listener-cert", "example.com", "term.example.com")
	hs := withPP(httpsListener(0, tlsServer("", []string{"ns/cert"}, vhost("", route("r", "/", backend("be", 1))))), false, false)
	tr := func(name, cluster string) *irv1.Route { return l4Route("route.tls", name, backend(cluster, 1)) }
	tl := withPP(l4Listener("TLS", closedPort(t),
		passthroughServer("pass.example.com", vhost("pass.example.com", tr("pass", "pass"))),
		tlsServer("term.example.com", []string{"ns/cert"}, vhost("term.example.com", tr("term", "term")))), false, true)
	tcp := withPP(portKeyed("TCP", closedPort(t), l4Route("route.tcp", "t", backend("echo", 1))), true, false)
	p := newClientProxy(t, proxy.Limits{ProxyProtocolHeaderTimeout: 2 * time.Second})
	apply(t, p, snapshot(t, []*irv1.Listener{hs, tl, tcp}, []*irv1.Cluster{cluster("be", be),
		l4Cluster("pass", irv1.Cluster_TCP, pass.port), l4Cluster("term", irv1.Cluster_TCP, term.port),
		l4Cluster("echo", irv1.Cluster_TCP, echo.port)}, sec))

	t.Run("HTTPS", func(t *testing.T) {
		for _, v := range []byte{1, 2} {
			r := must(t, ppClient(addrOf(t, p, hs.Name), ppHeader(t, v, "203.0.113.7:9"), true).get("https://example.com/"))
			if r.status != 200 || r.proto != 2 || r.header.Get("X-Got-XFF") != "203.0.113.7" {
				t.Fatalf("v%d: status %d, HTTP/%d, backend saw X-Forwarded-For %q", v, r.status, r.proto, r.header.Get("X-Got-XFF"))
			}
		}
		if r := ppClient(addrOf(t, p, hs.Name), nil, true).get("https://example.com/"); r.err == nil {
			t.Fatalf("a TLS client without a header was served: %d", r.status)
		}
	})
	hdrWrap := func(v byte) func(net.Conn) net.Conn {
		return func(c net.Conn) net.Conn {
			_, _ = c.Write(ppHeader(t, v, "203.0.113.7:9"))
			return c
		}
	}
	t.Run("TLS passthrough", func(t *testing.T) {
		cn, line, err := tlsGreeting(addrOf(t, p, tl.Name), "pass.example.com", hdrWrap(2))
		if err != nil || cn != "pass" || line != "pass pass.example.com" {
			t.Fatalf("got %q %q %v", cn, line, err)
		}
		if _, _, err := tlsGreeting(addrOf(t, p, tl.Name), "pass.example.com", hdrWrap(1)); err == nil {
			t.Fatal("a v1 header was accepted on a v2 listener")
		}
		if _, _, err := tlsGreeting(addrOf(t, p, tl.Name), "pass.example.com", nil); err == nil {
			t.Fatal("a connection without a header was passed through")
		}
	})
	t.Run("TLS terminate", func(t *testing.T) {
		cn, line, err := tlsGreeting(addrOf(t, p, tl.Name), "term.example.com", hdrWrap(2))
		if err != nil || cn != "listener-cert" || line != "term" {
			t.Fatalf("got %q %q %v", cn, line, err)
		}
	})
	t.Run("TCP", func(t *testing.T) {
		c, err := net.Dial("tcp", addrOf(t, p, tcp.Name))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		// The header and the first bytes of the stream in one segment: nothing past the header
		// may be lost to it.
		if _, err := c.Write(append(ppHeader(t, 1, "203.0.113.7:9"), "hello"...)); err != nil {
			t.Fatal(err)
		}
		_ = c.(*net.TCPConn).CloseWrite()
		got, err := io.ReadAll(c)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != "echo\nhelloecho saw EOF\n" {
			t.Fatalf("backend relayed %q", got)
		}
		expectDropped(t, addrOf(t, p, tcp.Name), []byte("hello"), 5*time.Second)
	})
}

// TestProxyProtocolSwap: turning the policy on or off with a new snapshot keeps the socket and
// applies to new connections; a connection accepted before keeps going as it started.
func TestProxyProtocolSwap(t *testing.T) {
	be := newBackend(t, "be", nil)
	port := closedPort(t)
	plain := httpListener(port, server("", vhost("", route("r", "/", backend("be", 1)))))
	pp := withPP(httpListener(port, server("", vhost("", route("r", "/", backend("be", 1))))), false, false)
	cls := []*irv1.Cluster{cluster("be", be)}
	p := newClientProxy(t, proxy.Limits{})
	apply(t, p, snapshot(t, []*irv1.Listener{plain}, cls))
	addr := addrOf(t, p, plain.Name)
	old := ppClient(addr, nil, false)
	if r := must(t, old.get("http://example.com/")); r.status != 200 {
		t.Fatalf("status %d", r.status)
	}

	apply(t, p, snapshot(t, []*irv1.Listener{pp}, cls))
	if r := must(t, old.get("http://example.com/")); r.status != 200 || old.dials.Load() != 1 {
		t.Fatalf("the keep-alive connection: status %d, %d dials", r.status, old.dials.Load())
	}
	if r := ppClient(addr, nil, false).get("http://example.com/"); r.err == nil {
		t.Fatalf("a new connection without a header was served: %d", r.status)
	}
	withHdr := ppClient(addr, ppHeader(t, 2, "203.0.113.7:1"), false)
	if r := must(t, withHdr.get("http://example.com/")); r.header.Get("X-Got-XFF") != "203.0.113.7" {
		t.Fatalf("backend saw %q", r.header.Get("X-Got-XFF"))
	}

	apply(t, p, snapshot(t, []*irv1.Listener{plain}, cls))
	if r := must(t, ppClient(addr, nil, false).get("http://example.com/")); r.status != 200 || r.header.Get("X-Got-XFF") != "127.0.0.1" {
		t.Fatalf("plain again: status %d, XFF %q", r.status, r.header.Get("X-Got-XFF"))
	}
	if r := must(t, withHdr.get("http://example.com/")); r.header.Get("X-Got-XFF") != "203.0.113.7" || withHdr.dials.Load() != 1 {
		t.Fatalf("the PROXY connection after the swap: XFF %q, %d dials", r.header.Get("X-Got-XFF"), withHdr.dials.Load())
	}
}
