package proxy_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
	"github.com/coxswain-labs/coxswain/core/proxy/internal/testmod"
	"github.com/coxswain-labs/coxswain/core/proxy/listener"
	"github.com/coxswain-labs/coxswain/modules/lb/roundrobin"
)

// counter ("filter.test.counter") numbers the requests its instance has seen, in the request's
// X-Test header (which the echo backend returns as X-Got-Test): a new instance starts again at
// 1. counterCleanups counts the instances cleaned up.
type counter struct {
	n atomic.Int64
}

var counterCleanups atomic.Int64

func (*counter) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: "filter.test.counter", New: func() core.Module { return new(counter) }}
}

func (c *counter) FilterRequest(_ http.ResponseWriter, r *http.Request) bool {
	r.Header.Set("X-Test", strconv.FormatInt(c.n.Add(1), 10))
	return true
}

func (c *counter) Cleanup() error {
	counterCleanups.Add(1)
	return nil
}

func incrementalRegistry() *core.Registry {
	mods := append(testmod.Modules(), &roundrobin.RoundRobin{}, &listener.HTTP{}, &listener.HTTPS{}, &counter{})
	return core.NewRegistry(mods...)
}

func newIncrementalProxy(t testing.TB, full bool, metrics prometheus.Registerer) *proxy.Proxy {
	t.Helper()
	return newProxyWith(t, full, proxy.Options{Metrics: metrics, RequestMetrics: metrics != nil})
}

// newProxyWith is newIncrementalProxy with more options.
func newProxyWith(t testing.TB, full bool, opts proxy.Options) *proxy.Proxy {
	t.Helper()
	opts.Log, opts.Registry = testLogger(), incrementalRegistry()
	p := proxy.New(opts)
	proxy.SetFullBuilds(p, full)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = p.Close(ctx)
	})
	return p
}

// A snapshot that changes one route recompiles that route only: the other route and both
// clusters are the serving table's own objects, so the module instances keep their state (the
// counter filter goes on counting, the round-robin balancer goes on alternating), while the
// changed route gets a new counter and the old one is cleaned up once the old table drained. A
// full build (what every change did before) starts both counters again.
func TestIncrementalBuildSharesUnchangedParts(t *testing.T) {
	a1, a2, b := newBackend(t, "a1", nil), newBackend(t, "a2", nil), newBackend(t, "b", nil)
	port := closedPort(t)
	count := core.MustConfig("filter.test.counter", nil)
	mk := func(bPrefix string) *irv1.Snapshot {
		ra := route("ra", "/", backend("ca", 1))
		ra.Filters = []*irv1.ModuleConfig{count}
		rb := route("rb", bPrefix, backend("cb", 1))
		rb.Filters = []*irv1.ModuleConfig{count}
		l := httpListener(port, server("", vhost("a.example", ra), vhost("b.example", rb)))
		ca := cluster("ca", a1, a2)
		ca.Balancer = &irv1.ModuleConfig{Id: string(roundrobin.ModuleID)}
		return snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{ca, cluster("cb", b)})
	}
	for _, full := range []bool{false, true} {
		t.Run(fmt.Sprintf("full=%t", full), func(t *testing.T) {
			p := newIncrementalProxy(t, full, nil)
			apply(t, p, mk("/"))
			c := newClient(addrOf(t, p, "127.0.0.1:"+itoa(port)+"/HTTP"), nil)
			get := func(host string) (count, backend string) {
				r := must(t, c.get("http://x/", "Host", host))
				if r.status != http.StatusOK {
					t.Fatalf("GET %s: %d", host, r.status)
				}
				return r.header.Get("X-Got-Test"), r.header.Get("X-Backend")
			}
			_, first := get("a.example")
			_, second := get("a.example")
			if first == second {
				t.Fatalf("round robin over a1, a2 gave %s twice", first)
			}
			if n, _ := get("b.example"); n != "1" {
				t.Fatalf("rb's counter at %s", n)
			}
			ra, ma, ca, cb, rb := proxy.RouteOf(p, "ra"), proxy.MatcherOf(p, "ra"), proxy.ClusterOf(p, "ca"), proxy.ClusterOf(p, "cb"), proxy.RouteOf(p, "rb")
			before := counterCleanups.Load()

			apply(t, p, mk("/other"))

			shared := proxy.RouteOf(p, "ra") == ra && proxy.MatcherOf(p, "ra") == ma &&
				proxy.ClusterOf(p, "ca") == ca && proxy.ClusterOf(p, "cb") == cb
			if shared == full {
				t.Errorf("unchanged route and clusters shared = %t", shared)
			}
			if proxy.RouteOf(p, "rb") == rb {
				t.Error("the changed route was not recompiled")
			}
			n, third := get("a.example")
			if wantN := map[bool]string{false: "3", true: "1"}[full]; n != wantN {
				t.Errorf("ra's counter after an unrelated change: %s, want %s", n, wantN)
			}
			if !full && third != first {
				t.Errorf("round robin after an unrelated change picked %s, want %s (its turn)", third, first)
			}
			if r := must(t, c.get("http://x/other", "Host", "b.example")); r.header.Get("X-Got-Test") != "1" {
				t.Errorf("the changed route's counter: %q, want a new instance", r.header.Get("X-Got-Test"))
			}
			wantCleanups := map[bool]int64{false: 1, true: 2}[full] // rb's old instance; and ra's, when rebuilt
			eventually(t, "the old table's own modules cleaned up", func() bool { return counterCleanups.Load()-before == wantCleanups })
			time.Sleep(20 * time.Millisecond) // no condition to await for "no more": give a stray cleanup its chance
			if got := counterCleanups.Load() - before; got != wantCleanups {
				t.Errorf("%d counter instances cleaned up, want %d", got, wantCleanups)
			}
		})
	}
}

// A shared cluster whose endpoints change with a route change takes them in place at the swap
// (its balancer is live), and one whose balancer is not is rebuilt with the routes that use it.
func TestIncrementalBuildClusterEndpoints(t *testing.T) {
	a, b := newBackend(t, "a", nil), newBackend(t, "b", nil)
	port := closedPort(t)
	mk := func(prefix string, be *testBackend, balancer string) *irv1.Snapshot {
		l := httpListener(port, server("", vhost("", route("r", "/", backend("c", 1)), route("o", prefix, backend("c", 1)))))
		c := cluster("c", be)
		if balancer != "" {
			c.Balancer = &irv1.ModuleConfig{Id: balancer}
		}
		return snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{c})
	}
	for _, balancer := range []string{"", "lb.test_probe"} {
		t.Run("balancer="+balancer, func(t *testing.T) {
			p := newIncrementalProxy(t, false, nil)
			apply(t, p, mk("/o1", a, balancer))
			c := newClient(addrOf(t, p, "127.0.0.1:"+itoa(port)+"/HTTP"), nil)
			if r := must(t, c.get("http://x/")); r.body != "a" {
				t.Fatalf("before: %q", r.body)
			}
			cl, r := proxy.ClusterOf(p, "c"), proxy.RouteOf(p, "r")
			apply(t, p, mk("/o2", b, balancer))
			live := balancer == ""
			if got := proxy.ClusterOf(p, "c") == cl; got != live {
				t.Errorf("cluster shared = %t, want %t", got, live)
			}
			if got := proxy.RouteOf(p, "r") == r; got != live {
				t.Errorf("unchanged route on it shared = %t, want %t", got, live)
			}
			if r := must(t, c.get("http://x/")); r.body != "b" {
				t.Errorf("after: %q, want the new endpoint", r.body)
			}
		})
	}
}

// Random sequences of changes of every kind the builder distinguishes, applied to a proxy that
// builds incrementally and to one that builds everything: after every step both describe the
// same table (the same routes compiled from the same IR, every upstream pointing at the table's
// own cluster, the same endpoints), reject the same snapshots, and in the end hold the same
// request series. The snapshots share the virtual hosts and clusters no change touched with the
// previous one, as the translator's and the agent's do, and the incremental proxy remembers their
// hashes (Options.SharedMessages), so a route change takes the serving table's clusters whole.
//
// The runs of 300 hosts (several runs of ~64, shape.go) are taken whole, rebuilt around a change,
// and cut again where a change moved a cut; hosts are inserted anywhere and a hostname repeated
// in another run must be refused as a full build refuses it.
func TestIncrementalBuildEqualsFullBuild(t *testing.T) {
	for _, c := range []struct{ seeds, hosts int }{{6, 6}, {3, 300}} {
		for seed := range uint64(c.seeds) {
			t.Run(fmt.Sprintf("hosts=%d/seed=%d", c.hosts, seed), func(t *testing.T) { incrementalEqualsFull(t, seed, c.hosts) })
		}
	}
}

func incrementalEqualsFull(t *testing.T, seed uint64, hosts int) {
	regInc, regFull := prometheus.NewRegistry(), prometheus.NewRegistry()
	inc := newProxyWith(t, false, proxy.Options{Metrics: regInc, RequestMetrics: true, SharedMessages: true})
	full := newIncrementalProxy(t, true, regFull)
	m := newTableModel(rand.New(rand.NewPCG(seed, 17)), hosts)
	for step := range 60 {
		op := m.mutate()
		snap := m.snapshot(t)
		errInc, errFull := inc.Apply(context.Background(), snap), full.Apply(context.Background(), snap)
		if (errInc == nil) != (errFull == nil) {
			t.Fatalf("step %d (%s): incremental: %v, full: %v", step, op, errInc, errFull)
		}
		di, df := proxy.DescribeTable(inc), proxy.DescribeTable(full)
		if di != df {
			t.Fatalf("step %d (%s): tables differ\nincremental:\n%s\nfull:\n%s", step, op, di, df)
		}
		if strings.Contains(di, "STALE") || strings.Contains(di, "NOT INDEXED") {
			t.Fatalf("step %d (%s):\n%s", step, op, di)
		}
	}
	eventually(t, "the same request series", func() bool { return seriesOf(t, regInc) == seriesOf(t, regFull) })
}

func seriesOf(t testing.TB, g prometheus.Gatherer) string {
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "coxswain_proxy_request") {
			continue
		}
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			out = append(out, mf.GetName()+"{"+strings.Join(ls, ",")+"}")
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// tableModel is a snapshot as data that mutate changes at random.
type tableModel struct {
	r        *rand.Rand
	hosts    []*hostModel
	clusters map[string]*clusterModel
	serial   int
	invalid  bool // the next snapshot has a route to a missing cluster
	dupe     bool // the next snapshot repeats a hostname elsewhere in the list
}

type hostModel struct {
	name   string
	routes []*routeModel
	// made is the message of the latest snapshot and the routes it was made of: the next
	// snapshot shares it while they are the same.
	made       *irv1.VirtualHost
	madeRoutes []*routeModel
}

type routeModel struct {
	name, prefix, cluster string
	counter               bool
}

type clusterModel struct {
	ports    []uint32
	balancer string
	// made is its message in the latest snapshot, which the next one shares until it changes.
	made *irv1.Cluster
}

func newTableModel(r *rand.Rand, hosts int) *tableModel {
	m := &tableModel{r: r, clusters: map[string]*clusterModel{}}
	for i := range 4 {
		m.clusters["c"+itoa(uint32(i))] = &clusterModel{ports: []uint32{1}}
	}
	for range hosts {
		m.addHost()
	}
	return m
}

func (m *tableModel) next() string { m.serial++; return itoa(uint32(m.serial)) }

func (m *tableModel) anyCluster() string {
	names := make([]string, 0, len(m.clusters))
	for n := range m.clusters {
		names = append(names, n)
	}
	slices.Sort(names)
	return names[m.r.IntN(len(names))]
}

func (m *tableModel) newRoute() *routeModel {
	return &routeModel{name: "ns/r" + m.next(), prefix: "/p" + itoa(uint32(m.r.IntN(3))), cluster: m.anyCluster(), counter: m.r.IntN(2) == 0}
}

func (m *tableModel) addHost() {
	h := &hostModel{name: "h" + m.next() + ".example"}
	for range 1 + m.r.IntN(3) {
		h.routes = append(h.routes, m.newRoute())
	}
	m.hosts = append(m.hosts, h)
}

func (m *tableModel) anyRoute() (*hostModel, int) {
	for {
		h := m.hosts[m.r.IntN(len(m.hosts))]
		if len(h.routes) > 0 {
			return h, m.r.IntN(len(h.routes))
		}
	}
}

// mutate makes one random change and names it.
func (m *tableModel) mutate() string {
	switch m.r.IntN(14) {
	case 12:
		m.addHost()
		h := m.hosts[len(m.hosts)-1]
		i := m.r.IntN(len(m.hosts))
		copy(m.hosts[i+1:], m.hosts[i:])
		m.hosts[i] = h
		return "insert host"
	case 13:
		m.dupe = true
		return "a hostname twice (rejected)"
	case 0:
		h := m.hosts[m.r.IntN(len(m.hosts))]
		h.routes = slices.Insert(h.routes, m.r.IntN(len(h.routes)+1), m.newRoute())
		return "add route"
	case 1:
		h, i := m.anyRoute()
		if len(h.routes) > 1 {
			h.routes = slices.Delete(h.routes, i, i+1)
		}
		return "remove route"
	case 2:
		h, i := m.anyRoute()
		r := *h.routes[i]
		r.prefix = "/q" + m.next()
		h.routes[i] = &r
		return "change a route's match"
	case 3:
		h, i := m.anyRoute()
		r := *h.routes[i]
		r.cluster = m.anyCluster()
		h.routes[i] = &r
		return "move a route to another cluster"
	case 4:
		m.addHost()
		return "add host"
	case 5:
		if len(m.hosts) > 2 {
			i := m.r.IntN(len(m.hosts))
			m.hosts = slices.Delete(m.hosts, i, i+1)
		}
		return "remove host"
	case 6, 7:
		m.changeEndpoints()
		return "change a cluster's endpoints"
	case 8:
		c := m.clusters[m.anyCluster()]
		c.balancer = []string{"", "lb.test_probe", string(roundrobin.ModuleID)}[m.r.IntN(3)]
		c.made = nil
		return "change a cluster's balancer"
	case 9:
		h, i := m.anyRoute()
		r := *h.routes[i]
		other := m.hosts[m.r.IntN(len(m.hosts))]
		other.routes = append(other.routes, &r)
		return "the same route under another host"
	case 10:
		m.clusters["c"+m.next()] = &clusterModel{ports: []uint32{2}}
		return "add cluster"
	default:
		// Occasionally an invalid snapshot (a route to a cluster that is not there): both must
		// reject it and go on from the table they serve. Half of them change a cluster's
		// endpoints too, whose message the next snapshot shares: it must not be taken for one
		// the serving table has.
		m.invalid = true
		if m.r.IntN(2) == 0 {
			m.changeEndpoints()
			return "route to a missing cluster, endpoints changed (rejected)"
		}
		return "route to a missing cluster (rejected)"
	}
}

func (m *tableModel) changeEndpoints() {
	c := m.clusters[m.anyCluster()]
	c.ports = nil
	for p := range uint32(3) {
		if m.r.IntN(2) == 0 {
			c.ports = append(c.ports, p+1)
		}
	}
	c.made = nil
}

func (m *tableModel) snapshot(t testing.TB) *irv1.Snapshot {
	srv := server("")
	srv.Sources = []string{"ns/gw/http"}
	for _, h := range m.hosts {
		if h.made != nil && slices.Equal(h.madeRoutes, h.routes) { // a changed route is a new routeModel
			srv.VirtualHosts = append(srv.VirtualHosts, h.made)
			continue
		}
		vh := vhost(h.name)
		for _, r := range h.routes {
			rt := route(r.name, r.prefix, backend(r.cluster, 1))
			if r.counter {
				rt.Filters = []*irv1.ModuleConfig{core.MustConfig("filter.test.counter", nil)}
			}
			vh.Routes = append(vh.Routes, rt)
		}
		h.made, h.madeRoutes = vh, slices.Clone(h.routes)
		srv.VirtualHosts = append(srv.VirtualHosts, vh)
	}
	if m.invalid {
		m.invalid = false
		rt := route("ns/bad", "/bad", backend("missing", 1))
		bad := vhost(srv.VirtualHosts[0].GetHostname(), append(slices.Clone(srv.VirtualHosts[0].GetRoutes()), rt)...)
		srv.VirtualHosts[0] = bad // a new message: the shared one is not edited
	}
	if m.dupe {
		m.dupe = false
		vhs := srv.VirtualHosts
		twin := vhost(vhs[m.r.IntN(len(vhs))].GetHostname(), route("ns/twin", "/twin", backend(m.anyCluster(), 1)))
		srv.VirtualHosts = slices.Insert(slices.Clone(vhs), m.r.IntN(len(vhs)+1), twin)
	}
	names := make([]string, 0, len(m.clusters))
	for n := range m.clusters {
		names = append(names, n)
	}
	slices.Sort(names)
	var cs []*irv1.Cluster
	for _, n := range names {
		if made := m.clusters[n].made; made != nil {
			cs = append(cs, made)
			continue
		}
		c := &irv1.Cluster{Name: n}
		if b := m.clusters[n].balancer; b != "" {
			c.Balancer = &irv1.ModuleConfig{Id: b}
		}
		for _, p := range m.clusters[n].ports {
			c.Endpoints = append(c.Endpoints, &irv1.Endpoint{Address: "127.0.0.1", Port: p, Weight: 1})
		}
		m.clusters[n].made = c
		cs = append(cs, c)
	}
	s := &irv1.Snapshot{Listeners: []*irv1.Listener{httpListener(0, srv)}, Clusters: cs}
	if err := irv1.Seal(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// Layer-4 routes are shared like HTTP ones: a TCPRoute whose IR and cluster did not change keeps
// its compiled route (and an established connection its backend) across a change of an HTTP
// route on another listener, while a TCPRoute moved to another cluster is recompiled.
func TestIncrementalBuildSharesL4Routes(t *testing.T) {
	ta, tb := newTCPEcho(t, "a"), newTCPEcho(t, "b")
	web := newBackend(t, "web", nil)
	tcpPort, httpPort := closedPort(t), closedPort(t)
	mk := func(prefix, to string) *irv1.Snapshot {
		return snapshot(t, []*irv1.Listener{
			portKeyed("TCP", tcpPort, l4Route("route.tcp", "t", backend(to, 1))),
			httpListener(httpPort, server("", vhost("", route("r", prefix, backend("web", 1))))),
		}, []*irv1.Cluster{l4Cluster("ta", irv1.Cluster_TCP, ta.port), l4Cluster("tb", irv1.Cluster_TCP, tb.port), cluster("web", web)})
	}
	p := newL4Proxy(t, proxy.Limits{})
	apply(t, p, mk("/", "ta"))
	tcpAddr := addrOf(t, p, "127.0.0.1:"+itoa(tcpPort)+"/TCP")
	rt := proxy.RouteOf(p, "t")
	apply(t, p, mk("/other", "ta"))
	if proxy.RouteOf(p, "t") != rt {
		t.Error("the unchanged TCP route was recompiled by an HTTP route change")
	}
	if g := greeting(t, tcpAddr); g != "a" {
		t.Errorf("TCP route after an unrelated change: %q", g)
	}
	apply(t, p, mk("/other", "tb"))
	if proxy.RouteOf(p, "t") == rt {
		t.Error("the TCP route moved to another cluster was shared")
	}
	if g := greeting(t, tcpAddr); g != "b" {
		t.Errorf("TCP route after moving to tb: %q", g)
	}
}
