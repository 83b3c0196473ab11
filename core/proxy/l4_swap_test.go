package proxy_test

import (
	"bufio"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
)

// TestL4SurvivesSwap applies a snapshot that moves a TCP and a UDP port to another backend: an
// established connection and an open UDP session keep their backend, new ones get the new one.
func TestL4SurvivesSwap(t *testing.T) {
	ta, tb := newTCPEcho(t, "a"), newTCPEcho(t, "b")
	ua, ub := newUDPEcho(t, "a"), newUDPEcho(t, "b")
	tcpPort, udpPort := closedPort(t), closedPort(t)
	mk := func(to string) *irv1.Snapshot {
		return snapshot(t, []*irv1.Listener{
			portKeyed("TCP", tcpPort, l4Route("route.tcp", "t", backend("t"+to, 1))),
			portKeyed("UDP", udpPort, l4Route("route.udp", "u", backend("u"+to, 1))),
		}, []*irv1.Cluster{
			l4Cluster("ta", irv1.Cluster_TCP, ta.port), l4Cluster("tb", irv1.Cluster_TCP, tb.port),
			l4Cluster("ua", irv1.Cluster_UDP, ua), l4Cluster("ub", irv1.Cluster_UDP, ub),
		})
	}
	p := newL4Proxy(t, proxy.Limits{DrainTimeout: 300 * time.Millisecond})
	apply(t, p, mk("a"))
	tcpAddr := addrOf(t, p, "127.0.0.1:"+itoa(tcpPort)+"/TCP")
	udpAddr, _ := net.ResolveUDPAddr("udp", addrOf(t, p, "127.0.0.1:"+itoa(udpPort)+"/UDP"))

	c, err := net.Dial("tcp", tcpAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(c)
	if g, _ := r.ReadString('\n'); g != "a\n" {
		t.Fatalf("greeting %q", g)
	}
	uc := udpClient(t)
	if be, _, _ := udpAsk(t, uc, udpAddr, "before"); be != "a" {
		t.Fatalf("UDP backend %s", be)
	}

	apply(t, p, mk("b"))

	if _, err := io.WriteString(c, "still there\n"); err != nil {
		t.Fatal(err)
	}
	if line, err := r.ReadString('\n'); err != nil || line != "still there\n" {
		t.Fatalf("established connection after the swap: %q %v", line, err)
	}
	if be, _, _ := udpAsk(t, uc, udpAddr, "after"); be != "a" {
		t.Errorf("open UDP session moved to %s", be)
	}
	if g := greeting(t, tcpAddr); g != "b" {
		t.Errorf("new connection greeted by %q, want b", g)
	}
	if be, _, _ := udpAsk(t, udpClient(t), udpAddr, "new"); be != "b" {
		t.Errorf("new UDP client served by %s, want b", be)
	}

	// Removing the ports closes the established connection once DrainTimeout is over.
	apply(t, p, snapshot(t, nil, nil))
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if rest, err := io.ReadAll(r); err != nil && !isReset(err) && !strings.Contains(err.Error(), "closed") {
		t.Fatalf("after removal: %q %v", rest, err)
	}
}

func itoa(n uint32) string { return strconv.FormatUint(uint64(n), 10) }
