package proxy_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
)

// A server built from a copy of the serving one's host index must refuse what a full build
// refuses, and forget what the snapshot removed: duplicated hostnames (the same message twice,
// a changed and an unchanged virtual host of one name, names that differ only in case,
// wildcards, catch-alls), a duplicate ahead of the virtual host it duplicates, and removals
// and renames, each applied after a table whose messages the next snapshot shares. After every
// step both proxies serve the same table, and both reject the same snapshots.
func TestIncrementalBuildHostIndex(t *testing.T) {
	r := func(name, prefix string) *irv1.Route { return route(name, prefix, backend("c", 1)) }
	a, b := vhost("a.example", r("ra", "/")), vhost("b.example", r("rb", "/"))
	a2 := vhost("a.example", r("ra2", "/two"))
	upperA := vhost("A.Example", r("rA", "/"))
	w, w2 := vhost("*.w.example", r("rw", "/")), vhost("*.W.example", r("rw2", "/"))
	any1, any2 := vhost("", r("r0", "/")), vhost("", r("r1", "/one"))
	steps := []struct {
		name    string
		vhosts  []*irv1.VirtualHost
		invalid bool
	}{
		{"base", []*irv1.VirtualHost{a, b, w, any1}, false},
		{"the same message twice", []*irv1.VirtualHost{a, a, b, w, any1}, true},
		{"a changed and an unchanged one of one name", []*irv1.VirtualHost{a, b, a2, w, any1}, true},
		{"the duplicate first", []*irv1.VirtualHost{a2, a, b, w, any1}, true},
		{"names that differ in case", []*irv1.VirtualHost{a, upperA, b, w, any1}, true},
		{"the duplicate first, in another case", []*irv1.VirtualHost{upperA, a, b, w, any1}, true},
		{"wildcards that differ in case", []*irv1.VirtualHost{a, b, w, w2, any1}, true},
		{"two catch-alls", []*irv1.VirtualHost{a, b, w, any1, any2}, true},
		{"one replaced", []*irv1.VirtualHost{a2, b, w, any1}, false},
		{"renamed by case", []*irv1.VirtualHost{upperA, b, w2, any1}, false},
		{"removed", []*irv1.VirtualHost{b, any2}, false},
		{"reordered and back", []*irv1.VirtualHost{any2, w, b, a}, false},
		{"all gone", []*irv1.VirtualHost{b}, false},
	}
	be := newBackend(t, "c", nil)
	inc := newProxyWith(t, false, proxy.Options{SharedMessages: true})
	full := newIncrementalProxy(t, true, nil)
	for _, step := range steps {
		snap := snapshot(t, []*irv1.Listener{httpListener(0, server("", step.vhosts...))}, []*irv1.Cluster{cluster("c", be)})
		errInc, errFull := inc.Apply(context.Background(), snap), full.Apply(context.Background(), snap)
		if (errInc != nil) != step.invalid || (errFull != nil) != step.invalid {
			t.Fatalf("%s: incremental: %v, full: %v; want rejected = %t", step.name, errInc, errFull, step.invalid)
		}
		if errInc != nil && !strings.Contains(errInc.Error(), "listed twice") {
			t.Errorf("%s: %v, want a duplicate hostname named", step.name, errInc)
		}
		if di, df := proxy.DescribeTable(inc), proxy.DescribeTable(full); di != df {
			t.Fatalf("%s: tables differ\nincremental:\n%s\nfull:\n%s", step.name, di, df)
		}
	}
}

// An unchanged virtual host is shared whole: its routes are the serving table's objects after
// another virtual host changed, and after a cluster change that none of its routes uses; a
// cluster change that one of them uses recompiles it.
func TestIncrementalBuildSharesVirtualHosts(t *testing.T) {
	be1, be2 := newBackend(t, "one", nil), newBackend(t, "two", nil)
	a := vhost("a.example", route("ra", "/", backend("c1", 1)), route("ra2", "/x", backend("c1", 1)))
	mk := func(b *irv1.VirtualHost, c2 *irv1.Cluster) *irv1.Snapshot {
		return snapshot(t, []*irv1.Listener{httpListener(0, server("", a, b))}, []*irv1.Cluster{cluster("c1", be1), c2})
	}
	c2 := cluster("c2", be2)
	p := newProxyWith(t, false, proxy.Options{SharedMessages: true})
	apply(t, p, mk(vhost("b.example", route("rb", "/", backend("c2", 1))), c2))
	ra, ra2 := proxy.RouteOf(p, "ra"), proxy.RouteOf(p, "ra2")
	apply(t, p, mk(vhost("b.example", route("rb", "/other", backend("c2", 1))), c2))
	if proxy.RouteOf(p, "ra") != ra || proxy.RouteOf(p, "ra2") != ra2 {
		t.Fatal("the unchanged virtual host's routes were recompiled by another one's change")
	}
	c2b := cluster("c2", be2)
	c2b.ConnectTimeoutMs = 1234 // a new head: c2 is rebuilt, c1 is not
	apply(t, p, mk(vhost("b.example", route("rb", "/other", backend("c2", 1))), c2b))
	if proxy.RouteOf(p, "ra") != ra {
		t.Error("a virtual host on an unchanged cluster was recompiled by another cluster's change")
	}
	a = vhost("a.example", route("ra", "/", backend("c2", 1)), route("ra2", "/x", backend("c1", 1)))
	apply(t, p, mk(vhost("b.example", route("rb", "/other", backend("c2", 1))), c2b))
	if proxy.RouteOf(p, "ra") == ra || proxy.RouteOf(p, "ra2") != ra2 {
		t.Error("a changed virtual host did not recompile its changed route alone")
	}
}

// A build that fails after taking virtual hosts of a changed run into a new run of its own puts
// them back in their serving run: the next build, which takes that serving run whole again, must
// still refuse a duplicate of one of them, as a full build does.
func TestIncrementalBuildAfterFailureRefusesDuplicates(t *testing.T) {
	vhs := make([]*irv1.VirtualHost, 300)
	for i := range vhs {
		vhs[i] = vhost("h"+itoa(uint32(i))+".example", route("r"+itoa(uint32(i)), "/", backend("c", 1)))
	}
	clusters := []*irv1.Cluster{cluster("c")}
	mk := func(vhs []*irv1.VirtualHost) *irv1.Snapshot {
		return snapshot(t, []*irv1.Listener{httpListener(0, server("", vhs...))}, clusters)
	}
	base := mk(slices.Clone(vhs))
	// A run of several virtual hosts: the failing one goes last in it, the duplicated one first.
	first, last := -1, -1
	at := 0
	for _, n := range proxy.RunLengths(base) {
		if n >= 3 {
			first, last = at, at+n-1
			break
		}
		at += n
	}
	if first < 0 {
		t.Fatal("no run of three virtual hosts or more")
	}
	inc := newProxyWith(t, false, proxy.Options{SharedMessages: true})
	full := newProxyWith(t, true, proxy.Options{})
	for _, p := range []*proxy.Proxy{inc, full} {
		if err := p.Apply(context.Background(), base); err != nil {
			t.Fatal(err)
		}
	}
	bad := slices.Clone(vhs)
	bad[last] = vhost(vhs[last].GetHostname(), route("bad", "/", backend("missing", 1)))
	for _, p := range []*proxy.Proxy{inc, full} {
		if err := p.Apply(context.Background(), mk(bad)); err == nil {
			t.Fatal("a route to a missing cluster was accepted")
		}
	}
	twin := append(slices.Clone(vhs), vhost(vhs[first].GetHostname(), route("twin", "/twin", backend("c", 1))))
	errInc, errFull := inc.Apply(context.Background(), mk(twin)), full.Apply(context.Background(), mk(twin))
	if errInc == nil || errFull == nil {
		t.Fatalf("a hostname listed twice: incremental %v, full %v", errInc, errFull)
	}
	if di, df := proxy.DescribeTable(inc), proxy.DescribeTable(full); di != df {
		t.Fatalf("tables differ\nincremental:\n%s\nfull:\n%s", di, df)
	}
}
