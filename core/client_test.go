package core_test

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"testing"

	"github.com/coxswain-labs/coxswain/core"
)

func TestForwardedClient(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lines []string
		n     uint32
		want  string // "" means none (the peer)
	}{
		{"one hop, one entry", []string{"203.0.113.1"}, 1, "203.0.113.1"},
		{"one hop takes the rightmost", []string{"198.51.100.9, 203.0.113.1"}, 1, "203.0.113.1"},
		{"two hops", []string{"198.51.100.9, 203.0.113.1"}, 2, "198.51.100.9"},
		{"two hops across field lines", []string{"198.51.100.9", "203.0.113.1"}, 2, "198.51.100.9"},
		{"three hops, spaces and tabs", []string{"a, 198.51.100.9 ,\t203.0.113.1", "10.0.0.1"}, 3, "198.51.100.9"},
		{"too short", []string{"203.0.113.1"}, 2, ""},
		{"no header", nil, 1, ""},
		{"not an address", []string{"unknown, 203.0.113.1"}, 2, ""},
		{"empty entry", []string{"203.0.113.1,,10.0.0.1"}, 2, ""},
		{"with a port", []string{"203.0.113.1:4711"}, 1, "203.0.113.1"},
		{"IPv6 with a port", []string{"[2001:db8::1]:4711, 10.0.0.1"}, 2, "2001:db8::1"},
		{"IPv4-mapped is unmapped", []string{"::ffff:203.0.113.1"}, 1, "203.0.113.1"},
		{"zero hops trusts nothing", []string{"203.0.113.1"}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := core.ForwardedClient(tc.lines, tc.n)
			if (tc.want == "") == ok || (ok && got.String() != tc.want) {
				t.Fatalf("ForwardedClient(%q, %d) = %v, %v; want %q", tc.lines, tc.n, got, ok, tc.want)
			}
		})
	}
}

// TestClientAddr: the connection's peer, unless the connection trusts X-Forwarded-For hops and
// the header has enough entries; PeerAddr is always the peer. Neither allocates.
func TestClientAddr(t *testing.T) {
	c1, c2 := net.Pipe()
	defer c1.Close()
	defer c2.Close()
	peer := &peerConn{Conn: c1, addr: &net.TCPAddr{IP: net.ParseIP("::ffff:192.0.2.5"), Port: 1234}}
	req := func(hops uint32, xff ...string) *http.Request {
		r, _ := http.NewRequestWithContext(core.ContextWithClientIPDetection(context.Background(), peer, hops), "GET", "/", nil)
		if len(xff) > 0 {
			r.Header["X-Forwarded-For"] = xff
		}
		return r
	}
	wantPeer := netip.MustParseAddrPort("192.0.2.5:1234")
	for _, tc := range []struct {
		name string
		r    *http.Request
		want netip.AddrPort
	}{
		{"no detection", req(0, "203.0.113.1"), wantPeer},
		{"one hop", req(1, "198.51.100.1, 203.0.113.1"), netip.MustParseAddrPort("203.0.113.1:0")},
		{"too short", req(2, "203.0.113.1"), wantPeer},
		{"no header", req(1), wantPeer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := core.ClientAddr(tc.r); got != tc.want {
				t.Errorf("ClientAddr = %v, want %v", got, tc.want)
			}
			if got := core.PeerAddr(tc.r); got != wantPeer {
				t.Errorf("PeerAddr = %v, want %v", got, wantPeer)
			}
			if core.DownstreamConn(tc.r) != peer {
				t.Error("DownstreamConn is not the connection")
			}
			if n := testing.AllocsPerRun(100, func() { _ = core.ClientAddr(tc.r) }); n != 0 {
				t.Errorf("ClientAddr allocates %v times", n)
			}
		})
	}
}

type peerConn struct {
	net.Conn
	addr net.Addr
}

func (c *peerConn) RemoteAddr() net.Addr { return c.addr }

// TestConnClientAndSocketPeerPerConn: a caller may keep the client and socket peer per
// connection only when no request can change them: a plain listener's connection, not one that
// resolves X-Forwarded-For, nor a request whose filter replaced the client.
func TestConnClientAndSocketPeerPerConn(t *testing.T) {
	c1, c2 := net.Pipe()
	defer c1.Close()
	defer c2.Close()
	peer := &peerConn{Conn: c1, addr: &net.TCPAddr{IP: net.ParseIP("192.0.2.5"), Port: 1234}}
	plain := core.ContextWithConn(context.Background(), peer)
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want bool
	}{
		{"plain listener", plain, true},
		{"X-Forwarded-For detection", core.ContextWithClientIPDetection(context.Background(), peer, 1), false},
		{"client replaced by a filter", core.ContextWithClientAddr(plain, netip.MustParseAddrPort("203.0.113.1:0")), false},
	} {
		r, _ := http.NewRequestWithContext(tc.ctx, "GET", "/", nil)
		client, sock, perConn := core.ConnClientAndSocketPeer(r)
		if perConn != tc.want {
			t.Errorf("%s: perConn %v, want %v (client %v, socket peer %v)", tc.name, perConn, tc.want, client, sock)
		}
		if sock.String() != "192.0.2.5:1234" {
			t.Errorf("%s: socket peer %v", tc.name, sock)
		}
	}
}
