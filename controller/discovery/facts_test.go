package discovery

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// TestReuseEqualsPlain: after random changes made as the translator makes them (new messages
// for what changed, every other message shared with the previous snapshot), the kept facts give
// the module IDs of a walk of the whole snapshot, and each kept tailoring the snapshot (the same
// messages, the same version) and the route gaps that cloning and cutting the whole snapshot
// give, for dedicated proxies, proxies lacking modules and both; the published snapshots are
// never modified.
func TestReuseEqualsPlain(t *testing.T) {
	keys := []struct {
		gw      *gwKey
		missing []string
	}{
		{gw: &gwKey{"ns", "a"}},
		{gw: &gwKey{"ns", "b"}},
		{missing: []string{"filter.one"}},
		{missing: []string{"route.grpc"}},
		{missing: []string{"lb.x"}},
		{missing: []string{"listener.http3"}},
		{missing: []string{"listener.https"}},
		{gw: &gwKey{"ns", "b"}, missing: []string{"filter.three", "lb.y"}},
	}
	for seed := range uint64(6) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			g := &snapGen{rnd: rand.New(rand.NewPCG(seed, 16))}
			var cat catalog
			tailorings := make([]tailoring, len(keys))
			snap := g.fresh()
			for step := range 300 {
				if step > 0 {
					snap = g.change(snap)
				}
				before := proto.Clone(snap).(*irv1.Snapshot)
				facts := cat.update(snap)
				if want := plainModulesOf(snap); !reflect.DeepEqual(facts.modules, want) {
					t.Fatalf("step %d: modules %v, a walk of the snapshot says %v", step, facts.modules, want)
				}
				for i, k := range keys {
					got, err := tailorings[i].tailor(snap, facts, k.gw, k.missing)
					if err != nil {
						t.Fatal(err)
					}
					want, err := plainTailor(snap, k.gw, k.missing)
					if err != nil {
						t.Fatal(err)
					}
					if !proto.Equal(got, want) || got.GetVersion() != want.GetVersion() {
						t.Fatalf("step %d, tailoring %v %v: version %s, cloning and cutting gives %s", step, k.gw, k.missing, got.GetVersion(), want.GetVersion())
					}
					gotGaps := moduleGaps(snap, facts, k.gw, k.missing)
					if wantGaps := plainModuleGaps(snap, k.gw, k.missing); !reflect.DeepEqual(gotGaps, wantGaps) {
						t.Fatalf("step %d, tailoring %v %v: gaps %v, want %v", step, k.gw, k.missing, gotGaps, wantGaps)
					}
				}
				if !proto.Equal(snap, before) {
					t.Fatalf("step %d: the published snapshot was modified", step)
				}
			}
		})
	}
}

// snapGen makes random snapshots of two Gateways (a and b share :80, b has :443 with TLS) and
// changes them as the translator does.
type snapGen struct {
	rnd *rand.Rand
	n   int // names made so far
}

var (
	genMatches  = []string{"route.http", "route.http", "route.grpc"}
	genFilters  = []string{"filter.one", "filter.two"}
	genBEFilter = []string{"", "", "filter.three"}
	genBalancer = []string{"", "", "lb.x", "lb.y"}
)

func (g *snapGen) pick(xs []string) string { return xs[g.rnd.IntN(len(xs))] }

func (g *snapGen) vhost() *irv1.VirtualHost {
	g.n++
	vh := &irv1.VirtualHost{Hostname: fmt.Sprintf("h%d.example", g.n)}
	for j := range 1 + g.rnd.IntN(3) {
		r := &irv1.Route{Name: fmt.Sprintf("HTTPRoute/ns/r%d/rule/%d/match/0", g.n, j), Match: mc(g.pick(genMatches))}
		for range g.rnd.IntN(2) {
			r.Filters = append(r.Filters, mc(g.pick(genFilters)))
		}
		be := &irv1.Backend{Cluster: fmt.Sprintf("ns/c%d:80", g.rnd.IntN(12)), Weight: 1}
		if id := g.pick(genBEFilter); id != "" {
			be.Filters = []*irv1.ModuleConfig{mc(id)}
		}
		r.Backends = []*irv1.Backend{be}
		vh.Routes = append(vh.Routes, r)
	}
	return vh
}

func (g *snapGen) server(gw, section string) *irv1.Server {
	sv := &irv1.Server{Sources: []string{"ns/" + gw + "/" + section}}
	for range 1 + g.rnd.IntN(8) {
		sv.VirtualHosts = append(sv.VirtualHosts, g.vhost())
	}
	return sv
}

func (g *snapGen) cluster(i int) *irv1.Cluster {
	c := &irv1.Cluster{Name: fmt.Sprintf("ns/c%d:80", i), ConnectTimeoutMs: uint32(g.rnd.IntN(1000))}
	if id := g.pick(genBalancer); id != "" {
		c.Balancer = mc(id)
	}
	return c
}

func (g *snapGen) fresh() *irv1.Snapshot {
	https := g.server("b", "https")
	https.Tls = &irv1.TLS{Certificates: []string{"ns/b-cert"}}
	snap := &irv1.Snapshot{
		Listeners: []*irv1.Listener{
			{Name: ":80/HTTP", Port: 80, Protocol: "HTTP", Servers: []*irv1.Server{g.server("a", "http"), g.server("b", "http")}},
			{Name: ":443/HTTPS", Port: 443, Protocol: "HTTPS", Servers: []*irv1.Server{https}},
		},
		Secrets:  []*irv1.Secret{{Name: "ns/b-cert", PrivateKeyPem: []byte("b's key")}, {Name: "ns/other", PrivateKeyPem: []byte("k")}},
		Gateways: []*irv1.GatewayGeneration{{Namespace: "ns", Name: "a", Generation: 1}, {Namespace: "ns", Name: "b", Generation: 1}},
	}
	for i := range 12 {
		snap.Clusters = append(snap.Clusters, g.cluster(i))
	}
	return g.seal(snap)
}

func (g *snapGen) seal(snap *irv1.Snapshot) *irv1.Snapshot {
	if err := irv1.Seal(snap); err != nil {
		panic(err)
	}
	return snap
}

// change returns prev with one random change, sharing every message it does not change.
func (g *snapGen) change(prev *irv1.Snapshot) *irv1.Snapshot {
	next := irv1.Shallow(prev)
	next.Listeners = slices.Clone(prev.GetListeners())
	switch g.rnd.IntN(10) {
	case 0: // a new snapshot sharing nothing
		return g.fresh()
	case 1: // a cluster replaced (its balancer may change)
		next.Clusters = slices.Clone(prev.GetClusters())
		i := g.rnd.IntN(len(next.Clusters))
		next.Clusters[i] = g.cluster(i)
	case 2: // HTTP/3 on the HTTPS listener toggled
		l := irv1.Shallow(next.Listeners[1])
		if l.Http3 == nil {
			l.Http3 = &irv1.HTTP3{AdvertisedPort: 443}
		} else {
			l.Http3 = nil
		}
		next.Listeners[1] = l
	case 3: // a server of a third Gateway added to :80, or removed
		l := irv1.Shallow(next.Listeners[0])
		if len(l.Servers) == 2 {
			l.Servers = append(slices.Clone(l.Servers), g.server("c", "http"))
		} else {
			l.Servers = l.Servers[:2:2]
		}
		next.Listeners[0] = l
	default: // a virtual host replaced, added, removed or moved in one server
		li := g.rnd.IntN(len(next.Listeners))
		l := irv1.Shallow(next.Listeners[li])
		l.Servers = slices.Clone(l.Servers)
		si := g.rnd.IntN(len(l.Servers))
		sv := irv1.Shallow(l.Servers[si])
		vhs := slices.Clone(sv.VirtualHosts)
		i := g.rnd.IntN(len(vhs))
		switch g.rnd.IntN(4) {
		case 0:
			vhs[i] = g.vhost()
		case 1:
			vhs = slices.Insert(vhs, i, g.vhost())
		case 2:
			if len(vhs) > 1 {
				vhs = slices.Delete(vhs, i, i+1)
			}
		case 3:
			j := g.rnd.IntN(len(vhs))
			vhs[i], vhs[j] = vhs[j], vhs[i]
		}
		sv.VirtualHosts = vhs
		l.Servers[si] = sv
		next.Listeners[li] = l
	}
	return g.seal(next)
}

// TestTailoringSharesUnchanged: a dedicated proxy's cut of a route change shares every virtual
// host but the changed one with its cut of the previous snapshot, and a virtual host copied
// for a missing module is copied once, not per publication.
func TestTailoringSharesUnchanged(t *testing.T) {
	g := &snapGen{rnd: rand.New(rand.NewPCG(1, 2))}
	snap := g.fresh()
	var cat catalog
	var ded, lacking tailoring
	a1, err := ded.tailor(snap, cat.update(snap), &gwKey{"ns", "a"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m1, err := lacking.tailor(snap, factsOf(snap), nil, []string{"route.http", "route.grpc"})
	if err != nil {
		t.Fatal(err)
	}
	// Gateway a's first virtual host replaced.
	next := irv1.Shallow(snap)
	next.Listeners = slices.Clone(snap.Listeners)
	l := irv1.Shallow(next.Listeners[0])
	l.Servers = slices.Clone(l.Servers)
	sv := irv1.Shallow(l.Servers[0])
	sv.VirtualHosts = slices.Clone(sv.VirtualHosts)
	sv.VirtualHosts[0] = g.vhost()
	l.Servers[0], next.Listeners[0] = sv, l
	next = g.seal(next)
	a2, err := ded.tailor(next, cat.update(next), &gwKey{"ns", "a"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	old, cur := a1.Listeners[0].Servers[0].VirtualHosts, a2.Listeners[0].Servers[0].VirtualHosts
	if cur[0] == old[0] {
		t.Error("the changed virtual host is the previous cut's")
	}
	for i := 1; i < len(cur); i++ {
		if cur[i] != snap.Listeners[0].Servers[0].VirtualHosts[i] {
			t.Errorf("virtual host %d is a copy, not the published message", i)
		}
	}
	m2, err := lacking.tailor(next, factsOf(next), nil, []string{"route.http", "route.grpc"})
	if err != nil {
		t.Fatal(err)
	}
	// Gateway b's HTTP server did not change: its copies (every route dropped) are the same.
	if old, cur := m1.Listeners[0].Servers[1].VirtualHosts, m2.Listeners[0].Servers[1].VirtualHosts; old[0] != cur[0] {
		t.Error("a virtual host copied for the missing route kinds was copied again for a snapshot that shares it")
	}
}
