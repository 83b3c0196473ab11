package discovery_test

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	"github.com/coxswain-labs/coxswain/controller/discovery"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// hosts is the content of a snapshot of one Gateway (apps/a) with one HTTP listener and a virtual
// host per hostname, each routing every path to a cluster: a world deltas describe in parts.
type hosts struct {
	gen      int64
	address  string            // the listener's address ("" leaves it to the proxy)
	routes   map[string]string // hostname → cluster
	clusters map[string]cluster
}

func newHosts(n int, address string, clusters ...cluster) *hosts {
	w := &hosts{gen: 1, address: address, routes: map[string]string{}, clusters: map[string]cluster{}}
	for i := range n {
		w.routes[fmt.Sprintf("h%02d.example", i)] = clusters[0].name
	}
	for _, c := range clusters {
		w.clusters[c.name] = c
	}
	return w
}

func (w *hosts) snapshot(t testing.TB) *irv1.Snapshot {
	t.Helper()
	routes := map[string][]route{}
	for h, c := range w.routes {
		routes[h] = []route{{prefix: "/", cluster: c}}
	}
	var cs []cluster
	for _, name := range slices.Sorted(mapsKeys(w.clusters)) {
		cs = append(cs, w.clusters[name])
	}
	snap := snapshot(t, []gw{{ns: "apps", name: "a", gen: w.gen, address: w.address, routes: []route{{prefix: "/", cluster: cs[0].name}}}}, cs...)
	sv := snap.GetListeners()[0].GetServers()[0]
	sv.VirtualHosts = nil
	for _, h := range slices.Sorted(mapsKeys(routes)) {
		one := snapshot(t, []gw{{ns: "apps", name: "a", routes: routes[h]}})
		vh := one.GetListeners()[0].GetServers()[0].GetVirtualHosts()[0]
		vh.Hostname = h
		sv.VirtualHosts = append(sv.VirtualHosts, vh)
	}
	if err := irv1.Seal(snap); err != nil {
		t.Fatal(err)
	}
	return snap
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// getHost sends GET / with Host host to the proxy's listener and returns the body.
func (p *testProxy) getHost(ln, host string) (string, error) {
	a := p.addr(ln)
	if a == "" {
		return "", fmt.Errorf("listener %s not bound", ln)
	}
	req, err := http.NewRequest(http.MethodGet, "http://"+a+"/", nil)
	if err != nil {
		return "", err
	}
	req.Host = host
	res, err := httpClient.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %d: %s", res.StatusCode, b)
	}
	return string(b), err
}

// counter reads a counter of reg by name.
func counter(t testing.TB, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}

func withMetrics(reg *prometheus.Registry) func(*discovery.Options) {
	return func(o *discovery.Options) { o.Metrics = reg }
}

func proxyView(t testing.TB, s *testServer, node string) discovery.ProxyView {
	t.Helper()
	for _, p := range s.Fleet().Proxies {
		if p.Node == node {
			return p
		}
	}
	t.Fatalf("proxy %s not in the fleet", node)
	return discovery.ProxyView{}
}

// TestDeltaMixedFleet: a proxy that announced deltas and one that did not (as a proxy built
// before them) follow the same changes of every kind — a route's backend, a virtual host added
// and one removed, a cluster's endpoint, a Gateway generation alone. After each, the delta proxy
// was sent a delta a tenth the size of the snapshot or less and applied exactly the published
// snapshot (equal messages, the same version); the other was sent the snapshot in full; both
// serve the change, and the gate applied each generation.
func TestDeltaMixedFleet(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := startServer(t, withMetrics(reg))
	s.lead(t)
	h1, p1 := backendServer(t, "v1")
	h2, p2 := backendServer(t, "v2")
	h3, p3 := backendServer(t, "v3")
	w := newHosts(40, "127.0.0.1", cluster{"apps/v1:80", h1, p1}, cluster{"apps/v2:80", h2, p2})
	ln := listenerName("127.0.0.1", 0)
	s.publish(t, w.snapshot(t))
	pd := startProxy(t, s, proxyOpts{node: "deltas", token: "shared-token"})
	pf := startProxy(t, s, proxyOpts{node: "full", token: "shared-token", fullSnapshots: true})
	s.waitApplied(t, gwA, 1)

	steps := []struct {
		name       string
		change     func()
		host, body string // a request that shows the change
	}{
		{"a route's backend", func() { w.routes["h07.example"] = "apps/v2:80" }, "h07.example", "v2 /"},
		{"a virtual host added", func() { w.routes["new.example"] = "apps/v2:80" }, "new.example", "v2 /"},
		{"a virtual host removed", func() { delete(w.routes, "h03.example") }, "h04.example", "v1 /"},
		{"a cluster's endpoint", func() { w.clusters["apps/v1:80"] = cluster{"apps/v1:80", h3, p3} }, "h01.example", "v3 /"},
		{"the generation alone", func() {}, "h07.example", "v2 /"},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			st.change()
			w.gen++
			snap := w.snapshot(t)
			full, err := proto.Marshal(snap)
			if err != nil {
				t.Fatal(err)
			}
			s.publish(t, snap)
			s.waitApplied(t, gwA, w.gen)
			if got := pd.rec.applied(); !proto.Equal(got, snap) {
				t.Fatalf("the delta proxy applied a snapshot other than the published one (version %s, want %s)", got.GetVersion(), snap.GetVersion())
			}
			if got := pf.rec.applied(); !proto.Equal(got, snap) {
				t.Fatalf("the full proxy applied version %s, want %s", got.GetVersion(), snap.GetVersion())
			}
			if v := proxyView(t, s, "deltas"); !v.Deltas || !v.LastPushDelta || v.LastPushBytes*10 > len(full) {
				t.Fatalf("delta proxy's last push: deltas %v, delta %v, %d bytes (snapshot %d)", v.Deltas, v.LastPushDelta, v.LastPushBytes, len(full))
			}
			if v := proxyView(t, s, "full"); v.Deltas || v.LastPushDelta || v.LastPushBytes != len(full) {
				t.Fatalf("full proxy's last push: deltas %v, delta %v, %d bytes (snapshot %d)", v.Deltas, v.LastPushDelta, v.LastPushBytes, len(full))
			}
			for _, p := range []*testProxy{pd, pf} {
				eventually(t, st.host+" serves the change", func() error {
					b, err := p.getHost(ln, st.host)
					if err == nil && !strings.HasPrefix(b, st.body) {
						err = fmt.Errorf("body %q", b)
					}
					return err
				})
			}
		})
	}
	if _, err := pd.getHost(ln, "h03.example"); err == nil {
		t.Error("a removed virtual host still serves on the delta proxy")
	}
	if got := counter(t, reg, "coxswain_discovery_delta_pushes_total"); got != float64(len(steps)) {
		t.Errorf("delta pushes %v, want %d", got, len(steps))
	}
	if got := counter(t, reg, "coxswain_discovery_delta_mismatches_total"); got != 0 {
		t.Errorf("delta mismatches %v", got)
	}
}

// TestDeltaMismatchResync: a proxy whose engine already serves the current snapshot when its
// agent connects (so the controller counts it as acknowledged and sends nothing) holds no base
// for a delta. The next change reaches it as a delta it cannot rebuild: it answers a Nack with
// the mismatch reason, keeps serving, and is sent the same version in full, which it applies; it
// is not shown as a rejection, and later changes go as deltas again. Its listener names no
// address and the agent binds it to 127.0.0.1 (ListenAddress): the base it keeps is the
// controller's, so those deltas seal to the controller's versions.
func TestDeltaMismatchResync(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := startServer(t, withMetrics(reg))
	s.lead(t)
	h1, p1 := backendServer(t, "v1")
	h2, p2 := backendServer(t, "v2")
	w := newHosts(40, "", cluster{"apps/v1:80", h1, p1}, cluster{"apps/v2:80", h2, p2})
	ln := listenerName("", 0)
	v1 := w.snapshot(t)
	s.publish(t, v1)
	preload := proto.Clone(v1).(*irv1.Snapshot)
	preload.Listeners[0].Address = "127.0.0.1" // as the agent would have localized it
	p := startProxy(t, s, proxyOpts{node: "p", token: "shared-token", preload: preload, listenAddress: "127.0.0.1"})
	s.waitApplied(t, gwA, 1)
	if got := counter(t, reg, "coxswain_discovery_snapshot_pushes_total"); got != 0 {
		t.Fatalf("%v pushes to a proxy that serves the current snapshot", got)
	}

	w.routes["h05.example"] = "apps/v2:80"
	w.gen++
	v2 := w.snapshot(t)
	s.publish(t, v2)
	s.waitApplied(t, gwA, 2)
	if got := counter(t, reg, "coxswain_discovery_delta_mismatches_total"); got != 1 {
		t.Fatalf("delta mismatches %v, want 1", got)
	}
	v := proxyView(t, s, "p")
	if v.LastRejection != nil || v.LastPushDelta || v.AckedVersion != v2.GetVersion() {
		t.Fatalf("after the resync: rejection %+v, last push a delta %v, acknowledged %s (want %s)", v.LastRejection, v.LastPushDelta, v.AckedVersion, v2.GetVersion())
	}
	if got := counter(t, reg, "coxswain_discovery_snapshot_pushes_total"); got != 2 {
		t.Fatalf("%v pushes, want the delta and the full snapshot", got)
	}
	eventually(t, "h05 serves v2", func() error {
		b, err := p.getHost(ln, "h05.example")
		if err == nil && !strings.HasPrefix(b, "v2 /") {
			err = fmt.Errorf("body %q", b)
		}
		return err
	})

	for i := range 4 {
		if i%2 == 0 { // else the generation alone: the listener is the base's, unchanged
			w.routes[fmt.Sprintf("h%02d.example", w.gen)] = "apps/v2:80"
		}
		w.gen++
		snap := w.snapshot(t)
		s.publish(t, snap)
		s.waitApplied(t, gwA, w.gen)
		if v := proxyView(t, s, "p"); !v.LastPushDelta || v.AckedVersion != snap.GetVersion() {
			t.Fatalf("generation %d: last push a delta %v, acknowledged %s (want %s)", w.gen, v.LastPushDelta, v.AckedVersion, snap.GetVersion())
		}
		if got := p.rec.applied().GetListeners()[0].GetAddress(); got != "127.0.0.1" {
			t.Fatalf("the engine got listener address %q, want the agent's 127.0.0.1", got)
		}
	}
	if got := counter(t, reg, "coxswain_discovery_delta_mismatches_total"); got != 1 {
		t.Fatalf("delta mismatches %v after the resync, want still 1", got)
	}
}

// TestDeltaAfterReconnect: a proxy that missed snapshots while it had no stream (the term
// ended; the next one publishes two changes) gets the first push of its new stream in full — the
// controller knows nothing it could be a delta against — and deltas after that.
func TestDeltaAfterReconnect(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := startServer(t, withMetrics(reg))
	s.lead(t)
	h1, p1 := backendServer(t, "v1")
	h2, p2 := backendServer(t, "v2")
	w := newHosts(40, "127.0.0.1", cluster{"apps/v1:80", h1, p1}, cluster{"apps/v2:80", h2, p2})
	ln := listenerName("127.0.0.1", 0)
	s.publish(t, w.snapshot(t))
	p := startProxy(t, s, proxyOpts{node: "p", token: "shared-token"})
	s.waitApplied(t, gwA, 1)
	w.gen++
	w.routes["h01.example"] = "apps/v2:80"
	s.publish(t, w.snapshot(t))
	s.waitApplied(t, gwA, 2)
	if !proxyView(t, s, "p").LastPushDelta {
		t.Fatal("the second push was not a delta")
	}

	s.stepDown(t)
	eventually(t, "proxy notices the term ended", func() error {
		if p.agent.Connected() {
			return fmt.Errorf("still connected")
		}
		return nil
	})
	pushes, deltas := counter(t, reg, "coxswain_discovery_snapshot_pushes_total"), counter(t, reg, "coxswain_discovery_delta_pushes_total")
	s.report = newReporter()
	s.lead(t)
	var last *irv1.Snapshot
	for range 2 {
		w.gen++
		w.routes[fmt.Sprintf("h%02d.example", w.gen)] = "apps/v2:80"
		last = w.snapshot(t)
		s.publish(t, last)
	}
	s.waitApplied(t, gwA, w.gen)
	// The new stream's first push is full: then either the latest snapshot came in it, or the
	// one before did and the latest followed as a delta.
	morePushes := counter(t, reg, "coxswain_discovery_snapshot_pushes_total") - pushes
	moreDeltas := counter(t, reg, "coxswain_discovery_delta_pushes_total") - deltas
	if morePushes < 1 || moreDeltas != morePushes-1 {
		t.Fatalf("after reconnecting: %v pushes of which %v deltas; want the first one full", morePushes, moreDeltas)
	}
	if got := p.rec.applied(); !proto.Equal(got, last) {
		t.Fatalf("applied %s, want %s", got.GetVersion(), last.GetVersion())
	}
	w.gen++
	w.routes["h02.example"] = "apps/v2:80"
	snap := w.snapshot(t)
	s.publish(t, snap)
	s.waitApplied(t, gwA, w.gen)
	if v := proxyView(t, s, "p"); !v.LastPushDelta || v.AckedVersion != snap.GetVersion() {
		t.Fatalf("after the resync: last push a delta %v, acknowledged %s", v.LastPushDelta, v.AckedVersion)
	}
	eventually(t, "h02 serves v2", func() error {
		b, err := p.getHost(ln, "h02.example")
		if err == nil && !strings.HasPrefix(b, "v2 /") {
			err = fmt.Errorf("body %q", b)
		}
		return err
	})
}
