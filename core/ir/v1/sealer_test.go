package irv1

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"slices"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// TestSealerEqualsSeal: a Sealer gives Seal's version for a sequence of snapshots that share
// some messages with the previous one (as the translator's and the agent's do) and replace
// others, including a snapshot whose envelope message carries unknown fields (what a proxy
// decodes from a newer controller) and one sealed after Forget.
func TestSealerEqualsSeal(t *testing.T) {
	for _, skip := range []bool{false, true} {
		t.Run(fmt.Sprintf("SkipRoutes=%v", skip), func(t *testing.T) { sealerEqualsSeal(t, Sealer{SkipRoutes: skip}) })
	}
}

func sealerEqualsSeal(t *testing.T, s Sealer) {
	r := rand.New(rand.NewPCG(1, 2))
	vhs := make([]*VirtualHost, 400) // several runs (one in 64 virtual hosts ends one)
	clusters := make([]*Cluster, 10)
	newVH := func(i int) *VirtualHost {
		vh := &VirtualHost{Hostname: fmt.Sprintf("h%d.example", i)}
		for j := range 1 + r.IntN(3) {
			vh.Routes = append(vh.Routes, &Route{Name: fmt.Sprintf("r%d-%d-%d", i, j, r.IntN(1000)),
				Backends: []*Backend{{Cluster: fmt.Sprintf("c%d", r.IntN(len(clusters))), Weight: 1}}})
		}
		return vh
	}
	for i := range vhs {
		vhs[i] = newVH(i)
	}
	for i := range clusters {
		clusters[i] = &Cluster{Name: fmt.Sprintf("c%d", i), Endpoints: []*Endpoint{{Address: "10.0.0.1", Port: uint32(8000 + i)}}}
	}
	secret := &Secret{Name: "ns/cert", CertificatePem: []byte("cert"), PrivateKeyPem: []byte("key")}
	for step := range 120 {
		switch r.IntN(7) {
		case 0: // virtual hosts gone: the rest shift, by more than the sealer looks ahead at times
			at := r.IntN(len(vhs))
			vhs = slices.Delete(vhs, at, min(len(vhs), at+1+r.IntN(12)))
		case 1: // new ones
			at := r.IntN(len(vhs) + 1)
			for range 1 + r.IntN(12) {
				vhs = slices.Insert(vhs, at, newVH(r.IntN(1000)))
			}
		case 2: // new ones at the end: the last run was cut by the list's end, not by its content
			for range 1 + r.IntN(3) {
				vhs = append(vhs, newVH(r.IntN(1000)))
			}
		case 3: // the last one gone
			vhs = vhs[:len(vhs)-1]
		case 4: // changes all over the list
			for range 1 + r.IntN(20) {
				vhs[r.IntN(len(vhs))] = newVH(r.IntN(1000))
			}
		default: // a changed virtual host: a new message
			vhs[r.IntN(len(vhs))] = newVH(r.IntN(1000))
		}
		if len(vhs) < 10 {
			vhs = append(vhs, newVH(r.IntN(1000)), newVH(r.IntN(1000)))
		}
		if r.IntN(2) == 0 {
			i := r.IntN(len(clusters))
			clusters[i] = &Cluster{Name: clusters[i].GetName(), Endpoints: []*Endpoint{{Address: "10.0.0.2", Port: uint32(step)}}}
		}
		snap := &Snapshot{
			Listeners: []*Listener{{Name: "0.0.0.0:80/HTTP", Port: 80, Protocol: "HTTP", Http3: &HTTP3{AdvertisedPort: uint32(step)},
				Servers: []*Server{{Hostname: "", Sources: []string{"ns/gw/http"}, Tls: &TLS{Certificates: []string{"ns/cert"}}, VirtualHosts: append([]*VirtualHost(nil), vhs...)}}}},
			Clusters: append([]*Cluster(nil), clusters...),
			Secrets:  []*Secret{secret},
			Gateways: []*GatewayGeneration{{Namespace: "ns", Name: "gw", Generation: int64(step)}},
		}
		if step == 10 || step == 40 {
			// Field 99 of a Server, as a newer controller might add: kept and hashed.
			snap.Listeners[0].Servers[0].ProtoReflect().SetUnknown([]byte{0x9a, 0x06, 0x01, 'x'})
		}
		if step == 20 || step == 50 {
			s.Forget()
		}
		want := proto.Clone(snap).(*Snapshot)
		if err := referenceSeal(want); err != nil {
			t.Fatal(err)
		}
		if one := proto.Clone(snap).(*Snapshot); Seal(one) != nil || one.GetVersion() != want.GetVersion() {
			t.Fatalf("step %d: Seal gives %s, the reference %s", step, one.GetVersion(), want.GetVersion())
		}
		if err := s.Seal(snap); err != nil {
			t.Fatal(err)
		}
		if snap.GetVersion() != want.GetVersion() {
			t.Fatalf("step %d: Sealer gives %s, Seal %s", step, snap.GetVersion(), want.GetVersion())
		}
		if step%5 == 0 { // sealing the same snapshot again, all from remembered hashes
			if err := s.Seal(snap); err != nil || snap.GetVersion() != want.GetVersion() {
				t.Fatalf("resealed: %s, %v; want %s", snap.GetVersion(), err, want.GetVersion())
			}
		}
	}
}

// The version is the hash tree version.go defines, written out here by hand for a small snapshot
// (so that Seal and the Sealer cannot drift from it together), and a Sealer resealing a snapshot
// that replaced one virtual host hashes that virtual host, its route and the nodes above it only.
func TestVersionIsTheHashTree(t *testing.T) {
	route := &Route{Name: "ns/r", RuleName: "a"}
	vh := &VirtualHost{Hostname: "a.example", Routes: []*Route{route}}
	other := &VirtualHost{Hostname: "b.example"}
	srv := &Server{Sources: []string{"ns/gw/http"}, VirtualHosts: []*VirtualHost{vh, other}}
	l := &Listener{Name: "l", Port: 80, Protocol: "HTTP", Servers: []*Server{srv}}
	cl := &Cluster{Name: "c", Endpoints: []*Endpoint{{Address: "10.0.0.1", Port: 80}}}
	gw := &GatewayGeneration{Namespace: "ns", Name: "gw", Generation: 3}
	snap := &Snapshot{Version: "old", Listeners: []*Listener{l}, Clusters: []*Cluster{cl}, Gateways: []*GatewayGeneration{gw}}

	leaf := func(m proto.Message) []byte {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		return sum[:]
	}
	// cut is the runs of a field's element hashes: each ends after an element whose hash
	// begins with a byte below 4, or at the last element; a run hashes its elements' hashes.
	cut := func(elems ...[]byte) [][]byte {
		var runs [][]byte
		var cur []byte
		for i, e := range elems {
			cur = append(cur, e...)
			if e[0] < 4 || i == len(elems)-1 {
				sum := sha256.Sum256(cur)
				runs, cur = append(runs, sum[:]), nil
			}
		}
		return runs
	}
	// node hashes head's encoding, length first, then each run of each part field as the
	// field's number and the run's hash.
	node := func(head proto.Message, fields ...any) []byte {
		hb, err := proto.MarshalOptions{Deterministic: true}.Marshal(head)
		if err != nil {
			t.Fatal(err)
		}
		b := append(protowire.AppendVarint(nil, uint64(len(hb))), hb...)
		for i := 0; i < len(fields); i += 2 {
			for _, r := range fields[i+1].([][]byte) {
				b = append(b, byte(fields[i].(int)))
				b = append(b, r...)
			}
		}
		sum := sha256.Sum256(b)
		return sum[:]
	}
	hvh := node(&VirtualHost{Hostname: "a.example"}, 2, cut(leaf(route)))
	hother := node(&VirtualHost{Hostname: "b.example"})
	hsrv := node(&Server{Sources: []string{"ns/gw/http"}}, 4, cut(hvh, hother))
	hl := node(&Listener{Name: "l", Port: 80, Protocol: "HTTP"}, 5, cut(hsrv))
	hsnap := node(&Snapshot{Gateways: []*GatewayGeneration{gw}}, 2, cut(hl), 3, cut(leaf(cl)))
	want := hex.EncodeToString(hsnap[:16])

	for name, seal := range map[string]func(*Snapshot) error{"Seal": Seal, "referenceSeal": referenceSeal} {
		c := proto.Clone(snap).(*Snapshot)
		if err := seal(c); err != nil {
			t.Fatal(err)
		}
		if c.GetVersion() != want {
			t.Fatalf("%s gives %s, the hash tree %s", name, c.GetVersion(), want)
		}
	}
	var s Sealer
	if err := s.Seal(snap); err != nil || snap.GetVersion() != want {
		t.Fatalf("Sealer gives %s (%v), the hash tree %s", snap.GetVersion(), err, want)
	}

	// Another route on a.example: a new virtual host message, the rest shared.
	next := &Snapshot{Listeners: []*Listener{{Name: "l", Port: 80, Protocol: "HTTP", Servers: []*Server{{Sources: srv.Sources,
		VirtualHosts: []*VirtualHost{{Hostname: "a.example", Routes: []*Route{route, {Name: "ns/r2"}}}, other}}}}},
		Clusters: []*Cluster{cl}, Gateways: snap.Gateways}
	if err := s.Seal(next); err != nil {
		t.Fatal(err)
	}
	// The snapshot, its listener and server, the new virtual host and its new route: the first
	// route, the other virtual host and the cluster are remembered.
	if s.computed != 5 {
		t.Errorf("resealing after one virtual host changed hashed %d messages, want 5", s.computed)
	}
	// The new virtual host's routes (one run or two), the server's virtual hosts (likewise), one
	// each above; the cluster's run is the previous seal's.
	if s.runs < 4 || s.runs > 6 {
		t.Errorf("resealing after one virtual host changed hashed %d runs, want 4 to 6", s.runs)
	}
	want2 := proto.Clone(next).(*Snapshot)
	if err := referenceSeal(want2); err != nil || next.GetVersion() != want2.GetVersion() {
		t.Fatalf("Sealer gives %s, Seal %s (%v)", next.GetVersion(), want2.GetVersion(), err)
	}
}

// TestSealerHashesTheChangedRun: at 5,000 virtual hosts (~80 runs), resealing after one virtual
// host was replaced, one added and one removed hashes their runs (each change one, or two when it
// moved a cut) and not the others, and gives Seal's version.
func TestSealerHashesTheChangedRun(t *testing.T) {
	vhs := make([]*VirtualHost, 5000)
	for i := range vhs {
		vhs[i] = &VirtualHost{Hostname: fmt.Sprintf("h%d.example", i), Routes: []*Route{{Name: fmt.Sprintf("r%d", i)}}}
	}
	snap := func() *Snapshot {
		return &Snapshot{Listeners: []*Listener{{Name: "l", Servers: []*Server{{VirtualHosts: slices.Clone(vhs)}}}}}
	}
	var s Sealer
	if err := s.Seal(snap()); err != nil {
		t.Fatal(err)
	}
	all := s.runs
	if all < 40 {
		t.Fatalf("5,000 virtual hosts sealed as %d runs, want about 80", all)
	}
	for step, change := range []func(){
		func() { vhs[2500] = &VirtualHost{Hostname: "h2500.example"} },
		func() { vhs = slices.Insert(vhs, 1000, &VirtualHost{Hostname: "new.example"}) },
		func() { vhs = slices.Delete(vhs, 4000, 4001) },
		func() { vhs = append(vhs, &VirtualHost{Hostname: "last.example"}) },
		func() { vhs[0] = &VirtualHost{Hostname: "first.example"} },
	} {
		change()
		next := snap()
		if err := s.Seal(next); err != nil {
			t.Fatal(err)
		}
		// The server's list: at most the change's run and the next one (a cut moved); above it
		// one run for the listener's servers and one for the snapshot's listeners.
		if s.runs > 4 {
			t.Errorf("step %d: %d runs hashed of %d", step, s.runs, all)
		}
		want := proto.Clone(next).(*Snapshot)
		if err := referenceSeal(want); err != nil || want.GetVersion() != next.GetVersion() {
			t.Fatalf("step %d: Sealer gives %s, the reference %s (%v)", step, next.GetVersion(), want.GetVersion(), err)
		}
	}
}

// BenchmarkSealerRouteChange reseals a snapshot of n virtual hosts (a route each, a cluster per
// ten) after one virtual host was replaced, as a route change gives the translator and a delta
// the agent: new messages for it and the nodes above it, every other message shared.
func BenchmarkSealerRouteChange(b *testing.B) {
	for _, n := range []int{1000, 5000, 20000} {
		b.Run(fmt.Sprintf("vhosts=%d", n), func(b *testing.B) {
			vhs := make([]*VirtualHost, n)
			route := func(i, v int) *Route {
				return &Route{Name: fmt.Sprintf("ns/r-%d-v%d", i, v), Backends: []*Backend{{Cluster: fmt.Sprintf("ns/svc-%d:80", i/10), Weight: 1}}}
			}
			for i := range vhs {
				vhs[i] = &VirtualHost{Hostname: fmt.Sprintf("h%d.example", i), Routes: []*Route{route(i, 0)}}
			}
			var clusters []*Cluster
			for i := range n / 10 {
				clusters = append(clusters, &Cluster{Name: fmt.Sprintf("ns/svc-%d:80", i), Endpoints: []*Endpoint{{Address: "10.0.0.1", Port: 80}}})
			}
			snap := func() *Snapshot {
				return &Snapshot{Listeners: []*Listener{{Name: "l", Port: 80, Protocol: "HTTP",
					Servers: []*Server{{Sources: []string{"ns/gw/http"}, VirtualHosts: append([]*VirtualHost(nil), vhs...)}}}},
					Clusters: clusters}
			}
			var s Sealer
			if err := s.Seal(snap()); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			cpu0 := processCPU(b)
			ops := 0
			for i := 0; b.Loop(); i++ {
				at := (i * 7919) % n
				vhs[at] = &VirtualHost{Hostname: vhs[at].GetHostname(), Routes: []*Route{route(at, i+1)}}
				if err := s.Seal(snap()); err != nil {
					b.Fatal(err)
				}
				ops++
			}
			// The machine is shared: CPU time per op (GC included) is the figure to compare.
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(time.Millisecond)/float64(ops), "cpu-ms/op")
		})
	}
}

func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// referenceSeal is Seal written plainly, by reflection, remembering nothing: the definition in
// version.go that the Sealer is held to.
func referenceSeal(s *Snapshot) error {
	s.Version = ""
	sum, err := plainHash(s.ProtoReflect())
	if err != nil {
		return err
	}
	s.Version = hex.EncodeToString(sum[:16])
	return nil
}

func plainHash(m protoreflect.Message) ([sha256.Size]byte, error) {
	d := m.Descriptor()
	parts, node := partFields[d.FullName()]
	if !node {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m.Interface())
		return sha256.Sum256(b), err
	}
	head := m.New()
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if !isPart(parts, fd) {
			head.Set(fd, v)
		}
		return true
	})
	head.SetUnknown(m.GetUnknown())
	hb, err := proto.MarshalOptions{Deterministic: true}.Marshal(head.Interface())
	if err != nil {
		return [sha256.Size]byte{}, err
	}
	b := protowire.AppendVarint(nil, uint64(len(hb)))
	b = append(b, hb...)
	for _, name := range parts {
		fd := d.Fields().ByName(name)
		l := m.Get(fd).List()
		var run []byte
		for i := range l.Len() {
			sum, err := plainHash(l.Get(i).Message())
			if err != nil {
				return [sha256.Size]byte{}, err
			}
			run = append(run, sum[:]...)
			if sum[0] < runCut || i == l.Len()-1 {
				rs := sha256.Sum256(run)
				run = run[:0]
				b = protowire.AppendVarint(b, uint64(fd.Number()))
				b = append(b, rs[:]...)
			}
		}
	}
	return sha256.Sum256(b), nil
}
