package proxy_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/core/accesslog"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
	"github.com/coxswain-labs/coxswain/core/proxy/internal/testmod"
	"github.com/coxswain-labs/coxswain/core/proxy/listener"
	"github.com/coxswain-labs/coxswain/modules/lb/roundrobin"
	"github.com/coxswain-labs/coxswain/modules/tcproute"
	"github.com/coxswain-labs/coxswain/modules/udproute"
)

// TestStreamObservation sends a TCPRoute connection through the proxy: when it ends, its bytes
// are counted per route and direction and it gets one access log line with them.
func TestStreamObservation(t *testing.T) {
	echo := newTCPEcho(t, "a")
	sink := newLineSink()
	reg := prometheus.NewRegistry()
	log := accesslog.New(accesslog.Options{Sink: sink})
	mods := append(testmod.Modules(), &roundrobin.RoundRobin{}, &listener.TCP{}, &tcproute.Route{})
	p := proxy.New(proxy.Options{Log: testLogger(), Registry: core.NewRegistry(mods...), Metrics: reg, RequestMetrics: true, AccessLog: log})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = p.Close(ctx)
		log.Close(nil)
	})
	rt := l4Route("route.tcp", "TCPRoute/ns/db/rule/0/match/0", backend("a", 1))
	rt.RuleName = "postgres"
	l := portKeyed("TCP", 0, rt)
	l.Servers[0].Sources = []string{"ns/gw/tcp"}
	apply(t, p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{l4Cluster("a", irv1.Cluster_TCP, echo.port)}))

	c, err := net.Dial("tcp", addrOf(t, p, l.Name))
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.(*net.TCPConn).CloseWrite()
	got, _ := io.ReadAll(bufio.NewReader(c))
	_ = c.Close()
	if want := "a\nping\na saw EOF\n"; string(got) != want {
		t.Fatalf("got %q, want %q", got, want)
	}

	line := sink.next(t)
	for k, v := range map[string]any{"msg": "connection", "listener": l.Name, "gateway": "ns/gw", "route": "TCPRoute/ns/db/rule/0/match/0",
		"rule": "postgres", "upstream": echo.addr, "bytes_in": float64(5), "bytes_out": float64(len(got)), "client_ip": "127.0.0.1"} {
		if line[k] != v {
			t.Errorf("%s = %v, want %v (line %v)", k, line[k], v, line)
		}
	}
	text := gatherText(t, reg)
	for _, want := range []string{
		`coxswain_proxy_stream_connections_total{gateway="ns/gw"route="TCPRoute/ns/db"} 1`,
		`coxswain_proxy_stream_bytes_total{direction="in"gateway="ns/gw"route="TCPRoute/ns/db"} 5`,
		`coxswain_proxy_stream_bytes_total{direction="out"gateway="ns/gw"route="TCPRoute/ns/db"} ` + strconv.Itoa(len(got)),
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no %s in\n%s", want, text)
		}
	}
}

// TestUDPSessionObservation sends datagrams through a UDPRoute: once the session is evicted for
// being idle, it is counted with its payload bytes each way and gets one access log line.
func TestUDPSessionObservation(t *testing.T) {
	echo := newUDPEcho(t, "a")
	sink := newLineSink()
	reg := prometheus.NewRegistry()
	log := accesslog.New(accesslog.Options{Sink: sink, FlushInterval: time.Millisecond})
	mods := append(testmod.Modules(), &roundrobin.RoundRobin{}, &listener.UDP{}, &udproute.Route{})
	p := proxy.New(proxy.Options{Log: testLogger(), Registry: core.NewRegistry(mods...), Metrics: reg, RequestMetrics: true,
		AccessLog: log, Limits: proxy.Limits{UDPSessionTimeout: 100 * time.Millisecond, UDPMaxSessions: 10}})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = p.Close(ctx)
		log.Close(nil)
	})
	rt := l4Route("route.udp", "UDPRoute/ns/dns/rule/0/match/0", backend("a", 1))
	rt.RuleName = "resolver"
	l := portKeyed("UDP", 0, rt)
	l.Servers[0].Sources = []string{"ns/gw/udp"}
	apply(t, p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{l4Cluster("a", irv1.Cluster_UDP, echo)}))
	paddr, err := net.ResolveUDPAddr("udp", addrOf(t, p, l.Name))
	if err != nil {
		t.Fatal(err)
	}
	c := udpClient(t)
	in, out := 0, 0
	for _, msg := range []string{"one", "three"} {
		be, port, echoed := udpAsk(t, c, paddr, msg)
		in += len(msg)
		out += len(be) + 1 + len(port) + 1 + len(echoed)
	}
	line := sink.next(t) // written once the session is evicted
	for k, v := range map[string]any{"msg": "session", "listener": l.Name, "gateway": "ns/gw", "route": "UDPRoute/ns/dns/rule/0/match/0",
		"rule": "resolver", "upstream": "127.0.0.1:" + strconv.Itoa(int(echo)), "bytes_in": float64(in), "bytes_out": float64(out),
		"client_ip": "127.0.0.1"} {
		if line[k] != v {
			t.Errorf("%s = %v, want %v (line %v)", k, line[k], v, line)
		}
	}
	text := gatherText(t, reg)
	for _, want := range []string{
		`coxswain_proxy_udp_sessions_total{gateway="ns/gw"route="UDPRoute/ns/dns"} 1`,
		`coxswain_proxy_udp_bytes_total{direction="in"gateway="ns/gw"route="UDPRoute/ns/dns"} ` + strconv.Itoa(in),
		`coxswain_proxy_udp_bytes_total{direction="out"gateway="ns/gw"route="UDPRoute/ns/dns"} ` + strconv.Itoa(out),
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no %s in\n%s", want, text)
		}
	}
}
