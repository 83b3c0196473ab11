package proxy_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy/internal/testmod"
)

var tagSeq atomic.Int64

// uniqueTag names one test run's matchers, so that -count=N runs do not share Cleanup counters.
func uniqueTag(t *testing.T) string {
	return fmt.Sprintf("%s#%d", t.Name(), tagSeq.Add(1))
}

// taggedRoute is a route whose matcher counts its Cleanup under tag.
func taggedRoute(name, prefix, tag string, backends ...*irv1.Backend) *irv1.Route {
	rt := route(name, prefix, backends...)
	rt.Match = core.MustConfig("route.testpath", map[string]string{"prefix": prefix, "tag": tag})
	return rt
}

// TestSwapUnderLoad applies snapshot after snapshot while clients hammer keep-alive connections:
// no request may fail, no connection may be closed, every retired table is cleaned up.
func TestSwapUnderLoad(t *testing.T) {
	v1, v2 := newBackend(t, "v1", nil), newBackend(t, "v2", nil)
	tag := uniqueTag(t)
	mk := func(i int) *irv1.Snapshot {
		to := []string{"v1", "v2"}[i%2]
		l := httpListener(0, server("", vhost("", taggedRoute("r", "/", tag, backend(to, 1)))))
		return snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{cluster("v1", v1), cluster("v2", v2)})
	}
	p := newProxy(t)
	apply(t, p, mk(0))
	addr := addrOf(t, p, "127.0.0.1:0/HTTP")

	const workers, swaps = 8, 30
	var total, failed atomic.Int64
	var mu sync.Mutex
	seen := map[string]int{}
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	clients := make([]*client, workers)
	for i := range clients {
		// One connection per client: a Transport may otherwise dial a second one when a request
		// starts before the last response's connection is back in its pool, which says nothing
		// about the proxy; with the cap, a second dial means the proxy closed the first.
		clients[i] = newClient(addr, func(tr *http.Transport) { tr.MaxConnsPerHost = 1 })
		wg.Add(1)
		go func(c *client) {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				r := c.get(hostURL("http", "example.com", "/"))
				total.Add(1)
				if r.err != nil || r.status != 200 {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprintf("status %d err %v", r.status, r.err))
					continue
				}
				mu.Lock()
				seen[r.header.Get("X-Backend")]++
				mu.Unlock()
			}
		}(clients[i])
	}
	for i := 1; i <= swaps; i++ {
		before := total.Load()
		eventually(t, "requests between swaps", func() bool { return total.Load() >= before+workers })
		apply(t, p, mk(i))
	}
	before := total.Load()
	eventually(t, "requests after the last swap", func() bool { return total.Load() >= before+workers })
	close(stop)
	wg.Wait()

	if n := failed.Load(); n != 0 {
		t.Fatalf("%d of %d requests failed; first: %v", n, total.Load(), firstErr.Load())
	}
	for i, c := range clients {
		if d := c.dials.Load(); d != 1 {
			t.Errorf("client %d dialed %d connections; a swap must not close keep-alive connections", i, d)
		}
	}
	if seen["v1"] == 0 || seen["v2"] == 0 {
		t.Errorf("requests did not follow the swaps: %v", seen)
	}
	eventually(t, "cleanup of every retired table", func() bool { return testmod.Cleanups(tag) == swaps })
	t.Logf("%d requests across %d swaps", total.Load(), swaps)
}

// TestSocketLifecycle: an unchanged port keeps its socket and connections; a removed listener is
// closed; a port whose protocol changes serves the new protocol.
func TestSocketLifecycle(t *testing.T) {
	a, b := newBackend(t, "a", nil), newBackend(t, "b", nil)
	clusters := []*irv1.Cluster{cluster("a", a), cluster("b", b)}
	port := closedPort(t)
	first := func(to string) *irv1.Listener {
		return httpListener(port, server("", vhost("", route("r", "/", backend(to, 1)))))
	}
	p := newProxy(t)
	apply(t, p, snapshot(t, []*irv1.Listener{first("a")}, clusters))
	addr := addrOf(t, p, first("a").Name)
	c := newClient(addr, nil)
	if r := must(t, c.get(hostURL("http", "example.com", "/"))); r.header.Get("X-Backend") != "a" {
		t.Fatalf("backend %q", r.header.Get("X-Backend"))
	}

	t.Run("route change keeps the socket and the connection", func(t *testing.T) {
		apply(t, p, snapshot(t, []*irv1.Listener{first("b")}, clusters))
		if got := addrOf(t, p, first("b").Name); got != addr {
			t.Fatalf("address changed %s → %s", addr, got)
		}
		if r := must(t, c.get(hostURL("http", "example.com", "/"))); r.header.Get("X-Backend") != "b" {
			t.Fatalf("old connection did not see the new table: backend %q", r.header.Get("X-Backend"))
		}
		if d := c.dials.Load(); d != 1 {
			t.Fatalf("%d dials, want the one keep-alive connection", d)
		}
	})

	second := httpListener(closedPort(t), server("", vhost("", route("r", "/", backend("a", 1)))))
	t.Run("adding a listener leaves the others alone", func(t *testing.T) {
		apply(t, p, snapshot(t, []*irv1.Listener{first("b"), second}, clusters))
		if len(p.Bound()) != 2 {
			t.Fatalf("bound %v", p.Bound())
		}
		must(t, newClient(addrOf(t, p, second.Name), nil).get(hostURL("http", "example.com", "/")))
		must(t, c.get(hostURL("http", "example.com", "/")))
		if d := c.dials.Load(); d != 1 {
			t.Fatalf("%d dials, want 1", d)
		}
	})

	t.Run("a removed listener is closed", func(t *testing.T) {
		apply(t, p, snapshot(t, []*irv1.Listener{second}, clusters))
		if len(p.Bound()) != 1 || p.Bound()[0].Name != second.Name {
			t.Fatalf("bound %v", p.Bound())
		}
		eventually(t, "the port to refuse connections", func() bool {
			conn, err := net.Dial("tcp", addr)
			if err == nil {
				_ = conn.Close()
			}
			return err != nil
		})
	})

	t.Run("protocol change on a port", func(t *testing.T) {
		sec := secret(t, "ns/cert", "switched", "example.com")
		tlsL := httpsListener(port, tlsServer("", []string{"ns/cert"}, vhost("", route("r", "/", backend("a", 1)))))
		plain := httpListener(port, server("", vhost("", route("r", "/", backend("a", 1)))))
		apply(t, p, snapshot(t, []*irv1.Listener{second, plain}, clusters))
		pc := newClient(addr, nil)
		must(t, pc.get(hostURL("http", "example.com", "/")))
		apply(t, p, snapshot(t, []*irv1.Listener{second, tlsL}, clusters, sec))
		r := must(t, newClient(addr, nil).get(hostURL("https", "example.com", "/")))
		if r.peerCN != "switched" || r.header.Get("X-Backend") != "a" {
			t.Fatalf("HTTPS on the switched port: cert %q backend %q", r.peerCN, r.header.Get("X-Backend"))
		}
		for _, bl := range p.Bound() {
			if bl.Name == tlsL.Name && bl.Protocol != "HTTPS" {
				t.Fatalf("bound %v", bl)
			}
		}
	})
}

// TestRejectedSnapshots: a snapshot that cannot be built is rejected with an error naming what
// failed, and the previous table keeps serving (a port that cannot be bound is not such a
// failure: bindfail_test.go).
func TestRejectedSnapshots(t *testing.T) {
	ok := newBackend(t, "ok", nil)
	good := httpListener(0, server("", vhost("", route("r/good", "/", backend("ok", 1)))))
	p := newProxy(t)
	base := snapshot(t, []*irv1.Listener{good}, []*irv1.Cluster{cluster("ok", ok)})
	apply(t, p, base)
	c := newClient(addrOf(t, p, good.Name), nil)

	freePort := closedPort(t)

	withRoute := func(rt *irv1.Route) []*irv1.Listener {
		return []*irv1.Listener{good, httpListener(freePort, server("", vhost("", rt)))}
	}
	badMatch := func(cfg string) *irv1.Route {
		rt := route("r/bad", "/", backend("ok", 1))
		rt.Match = &irv1.ModuleConfig{Id: "route.testpath", Json: []byte(cfg)}
		return rt
	}
	inert := route("r/inert", "/", backend("ok", 1))
	inert.Filters = []*irv1.ModuleConfig{{Id: "filter.test.inert"}}
	missing := route("r/missing", "/", backend("ok", 1))
	missing.Match = &irv1.ModuleConfig{Id: "route.nope"}
	badBalancer := cluster("ok", ok)
	badBalancer.Balancer = &irv1.ModuleConfig{Id: "lb.nope"}
	garbage := &irv1.Secret{Name: "ns/bad", CertificatePem: []byte("not a pem"), PrivateKeyPem: []byte("nope")}
	https := func(secret string) []*irv1.Listener {
		return []*irv1.Listener{good, httpsListener(freePort, tlsServer("", []string{secret},
			vhost("", route("r/tls", "/", backend("ok", 1)))))}
	}

	cases := []struct {
		name      string
		listeners []*irv1.Listener
		clusters  []*irv1.Cluster
		secrets   []*irv1.Secret
		want      []string // substrings of the error
	}{
		{"missing route module", withRoute(missing), nil, nil, []string{"route.nope", "r/missing", "/HTTP"}},
		{"invalid module config", withRoute(badMatch(`{"prefix":"no-slash"}`)), nil, nil, []string{"r/bad", "prefix must start with /"}},
		{"unknown module config field", withRoute(badMatch(`{"prefix":"/","bogus":1}`)), nil, nil, []string{"r/bad", "bogus"}},
		{"filter implementing no filter interface", withRoute(inert), nil, nil, []string{"r/inert", "filter.test.inert"}},
		{"unknown cluster", withRoute(route("r/lost", "/", backend("nope", 1))), nil, nil, []string{"r/lost", "cluster nope"}},
		{"missing balancer module", []*irv1.Listener{good}, []*irv1.Cluster{badBalancer}, nil, []string{"cluster ok", "lb.nope"}},
		{"certificate that does not parse", https("ns/bad"), nil, []*irv1.Secret{garbage}, []string{"ns/bad", "/HTTPS"}},
		{"certificate secret missing", https("ns/absent"), nil, nil, []string{"ns/absent"}},
		{"listener protocol without a module", []*irv1.Listener{good, {Name: "udp", Address: "127.0.0.1", Port: freePort, Protocol: "UDP"}}, nil, nil, []string{"listener.udp"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cs := tc.clusters
			if cs == nil {
				cs = []*irv1.Cluster{cluster("ok", ok)}
			}
			err := p.Apply(context.Background(), snapshot(t, tc.listeners, cs, tc.secrets...))
			if err == nil {
				t.Fatal("snapshot accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if p.Version() != base.Version {
				t.Fatalf("version %s, want the old %s", p.Version(), base.Version)
			}
			if len(p.Bound()) != 1 {
				t.Fatalf("bound %v after a rejection", p.Bound())
			}
			if r := must(t, c.get(hostURL("http", "example.com", "/"))); r.status != 200 {
				t.Fatalf("old table stopped serving: %d", r.status)
			}
		})
	}
	t.Run("sockets bound for a rejected snapshot are released", func(t *testing.T) {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", freePort))
		if err != nil {
			t.Fatalf("port %d still held: %v", freePort, err)
		}
		_ = l.Close()
	})
	t.Run("same version is a no-op", func(t *testing.T) {
		if err := p.Apply(context.Background(), base); err != nil {
			t.Fatal(err)
		}
	})
}

// TestCleanupAfterRetirement: a retired table's modules are cleaned up only once its last
// in-flight request has finished.
func TestCleanupAfterRetirement(t *testing.T) {
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	slow := newBackend(t, "slow", func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
		_, _ = w.Write([]byte("done"))
	})
	t.Cleanup(unblock) // registered after the backend, so it runs before the backend's Close waits for the handler
	tag := uniqueTag(t)
	mk := func(prefix string) *irv1.Snapshot {
		l := httpListener(0, server("", vhost("", taggedRoute("r", prefix, tag, backend("slow", 1)))))
		return snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{cluster("slow", slow)})
	}
	p := newProxy(t)
	apply(t, p, mk("/"))
	c := newClient(addrOf(t, p, "127.0.0.1:0/HTTP"), nil)
	done := make(chan result, 1)
	go func() { done <- c.get(hostURL("http", "example.com", "/slow")) }()
	<-entered

	apply(t, p, mk("/s"))
	if n := testmod.Cleanups(tag); n != 0 {
		t.Fatalf("retired table cleaned up with a request in flight (%d cleanups)", n)
	}
	unblock()
	if r := <-done; r.err != nil || r.body != "done" {
		t.Fatalf("in-flight request: %v %q", r.err, r.body)
	}
	eventually(t, "cleanup of the retired table", func() bool { return testmod.Cleanups(tag) == 1 })
}

// gate is a backend that holds each request until released.
func gate(t *testing.T) (be *testBackend, entered <-chan struct{}, release func()) {
	in := make(chan struct{}, 4)
	out := make(chan struct{})
	var once sync.Once
	be = newBackend(t, "gate", func(w http.ResponseWriter, _ *http.Request) {
		in <- struct{}{}
		<-out
		_, _ = w.Write([]byte("done"))
	})
	release = func() { once.Do(func() { close(out) }) }
	t.Cleanup(release) // runs before the backend's Close, which waits for held handlers
	return be, in, release
}

func refuses(addr string) func() bool {
	return func() bool {
		conn, err := net.Dial("tcp", addr)
		if err == nil {
			_ = conn.Close()
		}
		return err != nil
	}
}

// TestDrain: a removed listener and Close both stop accepting at once but let in-flight requests
// finish.
func TestDrain(t *testing.T) {
	be, entered, release := gate(t)
	clusters := []*irv1.Cluster{cluster("gate", be)}
	doomed := httpListener(closedPort(t), server("", vhost("", route("r", "/", backend("gate", 1)))))
	kept := httpListener(0, server("", vhost("", route("r", "/", backend("gate", 1)))))
	p := newProxy(t)
	apply(t, p, snapshot(t, []*irv1.Listener{doomed, kept}, clusters))
	doomedAddr, keptAddr := addrOf(t, p, doomed.Name), addrOf(t, p, kept.Name)

	t.Run("removed listener", func(t *testing.T) {
		done := make(chan result, 1)
		go func() { done <- newClient(doomedAddr, nil).get(hostURL("http", "example.com", "/")) }()
		<-entered
		apply(t, p, snapshot(t, []*irv1.Listener{kept}, clusters))
		eventually(t, "the removed port to refuse connections", refuses(doomedAddr))
		release()
		if r := <-done; r.err != nil || r.body != "done" {
			t.Fatalf("in-flight request on the removed listener: %v %q", r.err, r.body)
		}
	})

	t.Run("close", func(t *testing.T) {
		be2, entered2, release2 := gate(t)
		apply(t, p, snapshot(t, []*irv1.Listener{kept}, []*irv1.Cluster{cluster("gate", be2)}))
		done := make(chan result, 1)
		go func() { done <- newClient(keptAddr, nil).get(hostURL("http", "example.com", "/")) }()
		<-entered2
		closed := make(chan error, 1)
		go func() { closed <- p.Close(context.Background()) }()
		eventually(t, "Close to stop accepting", refuses(keptAddr))
		release2()
		if r := <-done; r.err != nil || r.body != "done" {
			t.Fatalf("in-flight request during Close: %v %q", r.err, r.body)
		}
		if err := <-closed; err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := p.Apply(context.Background(), snapshot(t, nil, nil)); err == nil {
			t.Fatal("Apply after Close succeeded")
		}
	})
}

// TestOnlyNamedModulesProvisioned: the proxy provisions exactly the modules a snapshot names; a
// module compiled in (and in the registry) that no route names is never provisioned.
func TestOnlyNamedModulesProvisioned(t *testing.T) {
	be := newBackend(t, "be", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	before := testmod.Provisions()
	p := newProxy(t)
	plain := httpListener(0, server("", vhost("", route("r", "/", backend("be", 1)))))
	apply(t, p, snapshot(t, []*irv1.Listener{plain}, []*irv1.Cluster{cluster("be", be)}))
	if n := testmod.Provisions() - before; n != 0 {
		t.Fatalf("filter.test.tripwire provisioned %d times by a snapshot that does not name it", n)
	}
	named := httpListener(0, server("", vhost("", route("r", "/", backend("be", 1, core.MustConfig("filter.test.tripwire", struct{}{}))))))
	apply(t, p, snapshot(t, []*irv1.Listener{named}, []*irv1.Cluster{cluster("be", be)}))
	if n := testmod.Provisions() - before; n != 1 {
		t.Fatalf("filter.test.tripwire provisioned %d times by one snapshot naming it once, want 1", n)
	}
}
