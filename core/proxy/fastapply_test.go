package proxy_test

import (
	"bufio"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
)

// applyInPlace applies s and fails unless it updated the serving table in place.
func applyInPlace(t *testing.T, p *proxy.Proxy, s *irv1.Snapshot) {
	t.Helper()
	before := proxy.TableOf(p)
	apply(t, p, s)
	if proxy.TableOf(p) != before {
		t.Fatalf("snapshot %s was rebuilt, want an in-place endpoint update", s.GetVersion())
	}
	if p.Version() != s.GetVersion() {
		t.Fatalf("Version() = %s, want %s", p.Version(), s.GetVersion())
	}
}

func weighted(c *irv1.Cluster, weights ...uint32) *irv1.Cluster {
	for i, w := range weights {
		c.Endpoints[i].Weight = w
	}
	return c
}

// Endpoints that change under continuous load: no request fails, traffic moves to the new
// endpoints, weights apply, an empty cluster answers 503 and recovers, and the table (and its
// version) is the new snapshot's without a rebuild.
func TestEndpointsOnlyUpdateInPlace(t *testing.T) {
	for _, proto := range []irv1.Cluster_Protocol{irv1.Cluster_HTTP1, irv1.Cluster_H2C} {
		t.Run(proto.String(), func(t *testing.T) {
			mk := newBackend
			if proto == irv1.Cluster_H2C {
				mk = func(t testing.TB, name string, _ http.HandlerFunc) *testBackend { return newH2CBackend(t, name) }
			}
			a, b, c := mk(t, "a", nil), mk(t, "b", nil), mk(t, "c", nil)
			port := closedPort(t)
			l := httpListener(port, server("", vhost("", route("r", "/", backend("web", 1)), route("o", "/other", backend("other", 1)))))
			snap := func(web *irv1.Cluster) *irv1.Snapshot {
				web.Protocol = proto
				other := cluster("other", c)
				other.Protocol = proto
				return snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{other, web})
			}
			p := newProxy(t)
			apply(t, p, snap(cluster("web", a)))
			addr := addrOf(t, p, l.Name)

			var ok, failed atomic.Int64
			var lastMu sync.Mutex
			last := ""
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					cl := newClient(addr, nil)
					for {
						select {
						case <-stop:
							return
						default:
						}
						r := cl.get("http://x/")
						if r.err != nil || r.status != http.StatusOK {
							failed.Add(1)
							t.Errorf("request during updates: %d %v", r.status, r.err)
							continue
						}
						ok.Add(1)
						lastMu.Lock()
						last = r.body
						lastMu.Unlock()
					}
				}()
			}
			lastIs := func(want string) func() bool {
				return func() bool { lastMu.Lock(); defer lastMu.Unlock(); return last == want }
			}
			eventually(t, "traffic on a", lastIs("a"))
			applyInPlace(t, p, snap(cluster("web", b)))
			eventually(t, "traffic moved to b", lastIs("b"))
			sets := [][]*testBackend{{a, b}, {a}, {b, c}, {c}, {a, b, c}, {b}}
			for i := range 30 {
				n := ok.Load()
				applyInPlace(t, p, snap(cluster("web", sets[i%len(sets)]...)))
				eventually(t, "requests after an update", func() bool { return ok.Load() > n+2 })
			}
			eventually(t, "traffic back on b only", lastIs("b"))
			n := ok.Load()
			eventually(t, "more requests", func() bool { return ok.Load() > n+20 })
			close(stop)
			wg.Wait()
			if failed.Load() != 0 {
				t.Fatalf("%d of %d requests failed", failed.Load(), ok.Load()+failed.Load())
			}

			cl := newClient(addr, nil)
			count := func(n int) map[string]int {
				got := map[string]int{}
				for range n {
					got[must(t, cl.get("http://x/")).body]++
				}
				return got
			}
			applyInPlace(t, p, snap(weighted(cluster("web", a, b), 3, 1)))
			if got := count(8); got["a"] != 6 || got["b"] != 2 {
				t.Errorf("weights 3:1 gave %v", got)
			}
			applyInPlace(t, p, snap(cluster("web")))
			if r := must(t, cl.get("http://x/")); r.status != http.StatusServiceUnavailable {
				t.Errorf("no endpoints: status %d, want 503", r.status)
			}
			applyInPlace(t, p, snap(cluster("web", c)))
			if r := must(t, cl.get("http://x/")); r.status != http.StatusOK || r.body != "c" {
				t.Errorf("endpoints back: %d %q", r.status, r.body)
			}
			if r := must(t, cl.get("http://x/other")); r.body != "c" {
				t.Errorf("unchanged cluster: %q", r.body)
			}
		})
	}
}

// A snapshot that changes anything but endpoints is rebuilt.
func TestNonEndpointChangeRebuilds(t *testing.T) {
	a := newBackend(t, "a", nil)
	port := closedPort(t)
	p := newProxy(t)
	mk := func(prefix string) *irv1.Snapshot {
		l := httpListener(port, server("", vhost("", route("r", prefix, backend("web", 1)))))
		return snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{cluster("web", a)})
	}
	apply(t, p, mk("/"))
	before := proxy.TableOf(p)
	s := mk("/new")
	apply(t, p, s)
	if proxy.TableOf(p) == before {
		t.Fatal("a route change was applied in place")
	}
	if p.Version() != s.GetVersion() {
		t.Fatalf("Version() = %s, want %s", p.Version(), s.GetVersion())
	}
	c := newClient(addrOf(t, p, "127.0.0.1:"+itoa(port)+"/HTTP"), nil)
	if r := must(t, c.get("http://x/")); r.status != http.StatusNotFound {
		t.Errorf("GET / after the route moved: %d", r.status)
	}
	if r := must(t, c.get("http://x/new")); r.body != "a" {
		t.Errorf("GET /new: %d %q", r.status, r.body)
	}
}

// Layer-4 clusters updated in place behave as a rebuild does (TestL4SurvivesSwap): an established
// TCP connection and an open UDP session keep their backend, new ones get the new endpoint.
func TestL4EndpointsUpdateInPlace(t *testing.T) {
	ta, tb := newTCPEcho(t, "a"), newTCPEcho(t, "b")
	ua, ub := newUDPEcho(t, "a"), newUDPEcho(t, "b")
	tcpPort, udpPort := closedPort(t), closedPort(t)
	mk := func(tcp, udp uint32) *irv1.Snapshot {
		return snapshot(t, []*irv1.Listener{
			portKeyed("TCP", tcpPort, l4Route("route.tcp", "t", backend("t", 1))),
			portKeyed("UDP", udpPort, l4Route("route.udp", "u", backend("u", 1))),
		}, []*irv1.Cluster{l4Cluster("t", irv1.Cluster_TCP, tcp), l4Cluster("u", irv1.Cluster_UDP, udp)})
	}
	p := newL4Proxy(t, proxy.Limits{DrainTimeout: 300 * time.Millisecond})
	apply(t, p, mk(ta.port, ua))
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

	applyInPlace(t, p, mk(tb.port, ub))

	if _, err := c.Write([]byte("still there\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := r.ReadString('\n'); err != nil || line != "still there\n" {
		t.Fatalf("established connection after the update: %q %v", line, err)
	}
	if be, _, _ := udpAsk(t, uc, udpAddr, "after"); be != "a" {
		t.Errorf("open UDP session moved to %s", be)
	}
	if g := greeting(t, tcpAddr); g != "b" {
		t.Errorf("new TCP connection greeted by %q, want b", g)
	}
	if be, _, _ := udpAsk(t, udpClient(t), udpAddr, "new"); be != "b" {
		t.Errorf("new UDP session on %s, want b", be)
	}
}

// A cluster whose balancer cannot take endpoints while serving (lb.test_probe) is rebuilt with
// its table when its endpoints change.
func TestEndpointsOfStaticBalancerRebuild(t *testing.T) {
	a, b := newBackend(t, "a", nil), newBackend(t, "b", nil)
	port := closedPort(t)
	l := httpListener(port, server("", vhost("", route("r", "/", backend("web", 1)))))
	mk := func(be *testBackend) *irv1.Snapshot {
		c := cluster("web", be)
		c.Balancer = &irv1.ModuleConfig{Id: "lb.test_probe"}
		return snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{c})
	}
	p := newProxy(t)
	apply(t, p, mk(a))
	before := proxy.TableOf(p)
	apply(t, p, mk(b))
	if proxy.TableOf(p) == before {
		t.Fatal("endpoints of a static balancer were updated in place")
	}
	if r := must(t, newClient(addrOf(t, p, l.Name), nil).get("http://x/")); r.body != "b" {
		t.Errorf("after the rebuild: %q", r.body)
	}
}
