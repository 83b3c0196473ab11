package delta

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	discv1 "github.com/coxswain-labs/coxswain/core/discovery/v1"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// world is a random snapshot's content, mutated step by step; snapshot builds fresh messages
// for changed parts and shares the rest, as the translator does.
type world struct {
	r         *rand.Rand
	n         int
	vh        map[string]*irv1.VirtualHost // key: listener|server|host
	cl        map[string]*irv1.Cluster
	sec       map[string]*irv1.Secret
	gw        map[string]*irv1.GatewayGeneration
	acme      []*irv1.ACMEChallenge
	listeners []string
	servers   map[string][]string // listener → server hostnames
	heads     map[string]uint32   // listener → a head field (port) that may change
}

func newWorld(seed uint64) *world {
	w := &world{r: rand.New(rand.NewPCG(seed, 7)), vh: map[string]*irv1.VirtualHost{}, cl: map[string]*irv1.Cluster{},
		sec: map[string]*irv1.Secret{}, gw: map[string]*irv1.GatewayGeneration{}, servers: map[string][]string{}, heads: map[string]uint32{}}
	for range 3 {
		w.addListener()
	}
	for range 40 {
		w.step()
	}
	return w
}

func (w *world) id() int { w.n++; return w.n }

func (w *world) addListener() {
	name := fmt.Sprintf("l%03d", w.id())
	w.listeners = append(w.listeners, name)
	w.heads[name] = uint32(w.id())
	for range 1 + w.r.IntN(3) {
		w.servers[name] = append(w.servers[name], fmt.Sprintf("s%d.example", w.id()))
	}
}

func (w *world) pick(keys []string) string { return keys[w.r.IntN(len(keys))] }

func keysOf[T any](m map[string]T) []string {
	var k []string
	for x := range m {
		k = append(k, x)
	}
	slices.Sort(k)
	return k
}

// step makes one random change.
func (w *world) step() {
	switch w.r.IntN(12) {
	case 0, 1, 2: // a virtual host added
		l := w.pick(w.listeners)
		s := w.pick(w.servers[l])
		w.vh[l+"|"+s+"|"+fmt.Sprintf("h%d", w.id())] = w.newVH()
	case 3, 4: // a route changed
		if k := keysOf(w.vh); len(k) > 0 {
			w.vh[w.pick(k)] = w.newVH()
		}
	case 5: // a virtual host removed
		if k := keysOf(w.vh); len(k) > 0 {
			delete(w.vh, w.pick(k))
		}
	case 6: // a cluster added or changed
		name := fmt.Sprintf("c%d", w.r.IntN(20))
		w.cl[name] = &irv1.Cluster{Name: name, Endpoints: []*irv1.Endpoint{{Address: "10.0.0.1", Port: uint32(w.id())}}}
	case 7:
		if k := keysOf(w.cl); len(k) > 0 {
			delete(w.cl, w.pick(k))
		}
	case 8: // secrets and gateways
		name := fmt.Sprintf("ns/s%d", w.r.IntN(5))
		w.sec[name] = &irv1.Secret{Name: name, CertificatePem: []byte(fmt.Sprint(w.id()))}
		g := fmt.Sprintf("g%d", w.r.IntN(4))
		if w.r.IntN(3) == 0 {
			delete(w.gw, g)
		} else {
			w.gw[g] = &irv1.GatewayGeneration{Namespace: "ns", Name: g, Generation: int64(w.id())}
		}
	case 9: // a listener added, removed or its head changed
		switch w.r.IntN(3) {
		case 0:
			w.addListener()
		case 1:
			if len(w.listeners) > 1 {
				i := w.r.IntN(len(w.listeners))
				w.listeners = slices.Delete(w.listeners, i, i+1)
			}
		default:
			w.heads[w.pick(w.listeners)] = uint32(w.id())
		}
	case 10: // a server added or removed
		l := w.pick(w.listeners)
		if w.r.IntN(2) == 0 || len(w.servers[l]) < 2 {
			w.servers[l] = append(w.servers[l], fmt.Sprintf("s%d.example", w.id()))
		} else {
			i := w.r.IntN(len(w.servers[l]))
			w.servers[l] = slices.Delete(w.servers[l], i, i+1)
		}
	case 11: // ACME, or the order of a listener's servers changes
		if w.r.IntN(2) == 0 {
			w.acme = []*irv1.ACMEChallenge{{Hostname: "a.example", Token: fmt.Sprint(w.id())}}
		} else {
			l := w.pick(w.listeners)
			w.r.Shuffle(len(w.servers[l]), func(i, j int) { w.servers[l][i], w.servers[l][j] = w.servers[l][j], w.servers[l][i] })
		}
	}
}

func (w *world) newVH() *irv1.VirtualHost {
	var routes []*irv1.Route
	for range 1 + w.r.IntN(3) {
		routes = append(routes, &irv1.Route{Name: fmt.Sprintf("r%d", w.id()), Backends: []*irv1.Backend{{Cluster: "c1", Weight: 1}}})
	}
	return &irv1.VirtualHost{Routes: routes}
}

// snapshot builds the sealed snapshot; the virtual host, cluster, secret and gateway messages
// are the world's own, shared between snapshots while unchanged.
func (w *world) snapshot(t testing.TB) *irv1.Snapshot {
	s := &irv1.Snapshot{}
	for _, l := range w.listeners {
		il := &irv1.Listener{Name: l, Port: w.heads[l], Protocol: "HTTP"}
		for _, sv := range w.servers[l] {
			is := &irv1.Server{Hostname: sv, Sources: []string{"ns/g/" + sv}}
			for _, k := range keysOf(w.vh) {
				if parts := splitKey(k); parts[0] == l && parts[1] == sv {
					vh := w.vh[k]
					vh.Hostname = parts[2] // set once: the key never changes
					is.VirtualHosts = append(is.VirtualHosts, vh)
				}
			}
			il.Servers = append(il.Servers, is)
		}
		s.Listeners = append(s.Listeners, il)
	}
	for _, k := range keysOf(w.cl) {
		s.Clusters = append(s.Clusters, w.cl[k])
	}
	for _, k := range keysOf(w.sec) {
		s.Secrets = append(s.Secrets, w.sec[k])
	}
	for _, k := range keysOf(w.gw) {
		s.Gateways = append(s.Gateways, w.gw[k])
	}
	s.AcmeChallenges = w.acme
	if err := irv1.Seal(s); err != nil {
		t.Fatal(err)
	}
	return s
}

func splitKey(k string) [3]string {
	var out [3]string
	i := 0
	start := 0
	for j := range len(k) {
		if k[j] == '|' {
			out[i] = k[start:j]
			i++
			start = j + 1
		}
	}
	out[i] = k[start:]
	return out
}

// wire sends d as the controller does and decodes it as the proxy does.
func wire(t testing.TB, d *discv1.Delta) *discv1.Delta {
	b, err := proto.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	out := &discv1.Delta{}
	if err := proto.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDeltaSequencesRebuildTheSnapshot: random sequences of changes of every kind; after every
// step the proxy's snapshot, rebuilt from the previous one and the delta (over the wire), seals
// to the controller's version and encodes to the very same bytes; its Sealer agrees with
// irv1.Seal throughout.
func TestDeltaSequencesRebuildTheSnapshot(t *testing.T) {
	for seed := range uint64(8) {
		w := newWorld(seed)
		prev := w.snapshot(t)
		proxySnap := proto.Clone(prev).(*irv1.Snapshot) // the proxy decoded its first one in full
		var sealer irv1.Sealer
		for step := range 80 {
			for range 1 + w.r.IntN(3) {
				w.step()
			}
			next := w.snapshot(t)
			d, err := Diff(prev, next)
			if err != nil {
				t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
			got, err := Apply(proxySnap, wire(t, d), next.GetVersion())
			if err != nil {
				t.Fatalf("seed %d step %d: apply: %v", seed, step, err)
			}
			if err := sealer.Seal(got); err != nil {
				t.Fatal(err)
			}
			if got.GetVersion() != next.GetVersion() {
				t.Fatalf("seed %d step %d: rebuilt version %s, want %s", seed, step, got.GetVersion(), next.GetVersion())
			}
			want, _ := deterministic.Marshal(next)
			gotB, _ := deterministic.Marshal(got)
			if string(want) != string(gotB) {
				t.Fatalf("seed %d step %d: rebuilt bytes differ", seed, step)
			}
			prev, proxySnap = next, got
		}
	}
}

// TestDeltaIsSmall: one changed route sends its virtual host and nothing else.
func TestDeltaIsSmall(t *testing.T) {
	w := newWorld(42)
	for range 200 {
		l := w.pick(w.listeners)
		w.vh[l+"|"+w.pick(w.servers[l])+"|"+fmt.Sprintf("h%d", w.id())] = w.newVH()
	}
	base := w.snapshot(t)
	k := keysOf(w.vh)[3]
	w.vh[k] = w.newVH()
	next := w.snapshot(t)
	d, err := Diff(base, next)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.GetListeners()) != 1 || !d.GetListeners()[0].GetPatched() || len(d.GetListeners()[0].GetServers()) != 1 {
		t.Fatalf("delta: %v", d)
	}
	sc := d.GetListeners()[0].GetServers()[0]
	if !sc.GetPatched() || len(sc.GetVirtualHosts()) != 1 || len(d.GetClusters()) != 0 {
		t.Fatalf("delta: %v", d)
	}
	full, _ := proto.Marshal(next)
	dd, _ := proto.Marshal(d)
	if len(dd)*20 > len(full) {
		t.Fatalf("delta %d bytes, full %d", len(dd), len(full))
	}
}

// TestApplyRejectsWhatDoesNotFit: a delta naming what the base lacks, or indexes out of
// range, is an error, and the base is untouched.
func TestApplyRejectsWhatDoesNotFit(t *testing.T) {
	w := newWorld(3)
	base := w.snapshot(t)
	before, _ := deterministic.Marshal(base)
	for name, d := range map[string]*discv1.Delta{
		"other base":      {BaseVersion: "nope"},
		"removed unknown": {BaseVersion: base.GetVersion(), RemovedClusters: []string{"nope"}},
		"index range":     {BaseVersion: base.GetVersion(), Clusters: []*irv1.Cluster{{Name: "zz"}}, ClusterIndexes: []uint32{9999}},
		"patched unknown": {BaseVersion: base.GetVersion(), Listeners: []*discv1.ListenerChange{{Listener: &irv1.Listener{Name: "nope"}, Patched: true}}},
	} {
		if _, err := Apply(base, d, "v"); err == nil {
			t.Errorf("%s: applied", name)
		}
	}
	after, _ := deterministic.Marshal(base)
	if string(before) != string(after) {
		t.Fatal("the base changed")
	}
}

// TestSnapshotFieldsCovered: a field added to Snapshot must be carried by Delta, or every delta
// would fall back to a full snapshot without a test saying so.
func TestSnapshotFieldsCovered(t *testing.T) {
	if n := (&irv1.Snapshot{}).ProtoReflect().Descriptor().Fields().Len(); n != 6 {
		t.Fatalf("Snapshot has %d fields; Diff and Apply handle 6: update them", n)
	}
}
