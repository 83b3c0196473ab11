package proxy_test

import (
	"net"
	"strconv"
	"testing"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
)

// TestL4IPv6 serves TCP and UDP routes on ::1 to IPv4 backends.
func TestL4IPv6(t *testing.T) {
	if ln, err := net.Listen("tcp", "[::1]:0"); err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	} else {
		_ = ln.Close()
	}
	ta, ua := newTCPEcho(t, "tcp"), newUDPEcho(t, "udp")
	v6 := func(l *irv1.Listener) *irv1.Listener {
		l.Address = "::1"
		l.Name = "[::1]:0/" + l.Protocol
		return l
	}
	p := newL4Proxy(t, proxy.Limits{})
	apply(t, p, snapshot(t, []*irv1.Listener{
		v6(portKeyed("TCP", 0, l4Route("route.tcp", "t", backend("t", 1)))),
		v6(portKeyed("UDP", 0, l4Route("route.udp", "u", backend("u", 1)))),
	}, []*irv1.Cluster{l4Cluster("t", irv1.Cluster_TCP, ta.port), l4Cluster("u", irv1.Cluster_UDP, ua)}))
	if g := greeting(t, addrOf(t, p, "[::1]:0/TCP")); g != "tcp" {
		t.Errorf("TCP greeting %q", g)
	}
	paddr, err := net.ResolveUDPAddr("udp", addrOf(t, p, "[::1]:0/UDP"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv6loopback})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 3 {
		be, _, echoed := udpAsk(t, c, paddr, "v6-"+strconv.Itoa(i))
		if be != "udp" || echoed != "v6-"+strconv.Itoa(i) {
			t.Fatalf("reply %s %q", be, echoed)
		}
	}
}
