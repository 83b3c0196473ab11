package proxy

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// setClusterHead copies every field of Cluster but its endpoints: a field added to Cluster must be
// added there too, or a change of it would be taken for an endpoint change.
func TestClusterHeadCoversFields(t *testing.T) {
	full := &irv1.Cluster{Name: "c", Protocol: irv1.Cluster_H2C, Balancer: &irv1.ModuleConfig{Id: "lb.x"},
		Endpoints: []*irv1.Endpoint{{Address: "127.0.0.1", Port: 1}}, ConnectTimeoutMs: 1, IdleTimeoutMs: 2,
		CircuitBreaker: &irv1.CircuitBreaker{ThresholdPercent: 1}, SessionPersistence: &irv1.SessionPersistence{Name: "s"},
		Tls: &irv1.UpstreamTLS{ServerName: "a"}}
	head := &irv1.Cluster{Endpoints: []*irv1.Endpoint{{Port: 9}}} // a reused head's leftovers go too
	setClusterHead(head, full)
	exp := proto.Clone(full).(*irv1.Cluster)
	exp.Endpoints = nil
	if !proto.Equal(head, exp) {
		t.Fatalf("setClusterHead gave %v, want %v", head, exp)
	}
	fields := (&irv1.Cluster{}).ProtoReflect().Descriptor().Fields()
	want := map[string]bool{"name": true, "protocol": true, "balancer": true, "endpoints": true,
		"connect_timeout_ms": true, "idle_timeout_ms": true, "circuit_breaker": true, "session_persistence": true, "tls": true}
	if fields.Len() != len(want) {
		t.Fatalf("Cluster has %d fields, clusterHead knows %d: update clusterHead", fields.Len(), len(want))
	}
	for i := range fields.Len() {
		if !want[string(fields.Get(i).Name())] {
			t.Fatalf("Cluster field %s unknown to clusterHead", fields.Get(i).Name())
		}
	}
}

func TestShapeIgnoresOnlyEndpointsAndVersion(t *testing.T) {
	base := func() *irv1.Snapshot {
		return &irv1.Snapshot{
			Version: "1",
			Listeners: []*irv1.Listener{{Name: "l", Address: "127.0.0.1", Port: 80, Protocol: "HTTP",
				Servers: []*irv1.Server{{VirtualHosts: []*irv1.VirtualHost{{Routes: []*irv1.Route{{Name: "r"}}}}}}}},
			Clusters: []*irv1.Cluster{{Name: "c", Balancer: &irv1.ModuleConfig{Id: "lb.round_robin"},
				Endpoints: []*irv1.Endpoint{{Address: "127.0.0.1", Port: 1, Weight: 1}}}},
			Secrets:  []*irv1.Secret{{Name: "s", CertificatePem: []byte("c")}},
			Gateways: []*irv1.GatewayGeneration{{Namespace: "n", Name: "g", Generation: 1}},
		}
	}
	cases := []struct {
		name string
		edit func(*irv1.Snapshot)
		same bool
	}{
		{"version", func(s *irv1.Snapshot) { s.Version = "2" }, true},
		{"endpoint address", func(s *irv1.Snapshot) { s.Clusters[0].Endpoints[0].Address = "127.0.0.2" }, true},
		{"endpoint weight", func(s *irv1.Snapshot) { s.Clusters[0].Endpoints[0].Weight = 5 }, true},
		{"no endpoints", func(s *irv1.Snapshot) { s.Clusters[0].Endpoints = nil }, true},
		{"cluster name", func(s *irv1.Snapshot) { s.Clusters[0].Name = "d" }, false},
		{"cluster protocol", func(s *irv1.Snapshot) { s.Clusters[0].Protocol = irv1.Cluster_H2C }, false},
		{"balancer", func(s *irv1.Snapshot) { s.Clusters[0].Balancer.Json = []byte("{}") }, false},
		{"connect timeout", func(s *irv1.Snapshot) { s.Clusters[0].ConnectTimeoutMs = 500 }, false},
		{"idle timeout", func(s *irv1.Snapshot) { s.Clusters[0].IdleTimeoutMs = 500 }, false},
		{"circuit breaker", func(s *irv1.Snapshot) { s.Clusters[0].CircuitBreaker = &irv1.CircuitBreaker{ThresholdPercent: 50} }, false},
		{"session persistence", func(s *irv1.Snapshot) {
			s.Clusters[0].SessionPersistence = &irv1.SessionPersistence{Name: "s"}
		}, false},
		{"upstream TLS", func(s *irv1.Snapshot) { s.Clusters[0].Tls = &irv1.UpstreamTLS{ServerName: "a"} }, false},
		{"another cluster", func(s *irv1.Snapshot) { s.Clusters = append(s.Clusters, &irv1.Cluster{Name: "e"}) }, false},
		{"route", func(s *irv1.Snapshot) { s.Listeners[0].Servers[0].VirtualHosts[0].Routes[0].Name = "q" }, false},
		{"listener port", func(s *irv1.Snapshot) { s.Listeners[0].Port = 81 }, false},
		{"secret", func(s *irv1.Snapshot) { s.Secrets[0].CertificatePem = []byte("d") }, false},
		{"gateway", func(s *irv1.Snapshot) { s.Gateways[0].Generation = 2 }, false},
	}
	want := shapeOf(base())
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := base()
			tc.edit(s)
			orig := proto.Clone(s)
			if got := shapeOf(s) == want; got != tc.same {
				t.Errorf("same shape = %v, want %v", got, tc.same)
			}
			if !proto.Equal(orig, s) {
				t.Error("shapeOf changed the snapshot")
			}
		})
	}
}

// digestOf hashes a virtual host's hostname and its routes: a field added to VirtualHost must be
// hashed too.
func TestVirtualHostHeadCoversFields(t *testing.T) {
	fields := (&irv1.VirtualHost{}).ProtoReflect().Descriptor().Fields()
	if fields.Len() != 2 || fields.ByNumber(1).Name() != "hostname" || fields.ByNumber(2).Name() != "routes" {
		t.Fatalf("VirtualHost has fields digestOf does not hash: update digestOf")
	}
}

// runSums lists a digest's runs of virtual hosts: each run's sum, then each of its virtual
// hosts' sum and route sums.
func runSums(d *digest) [][]sum {
	var out [][]sum
	for _, runs := range d.servers {
		for _, r := range runs {
			out = append(out, []sum{r.sum})
			for i, vs := range r.sums {
				if r.vhs[i] == nil {
					panic("a run without its virtual host")
				}
				out = append(out, append([]sum{vs.all}, vs.routes...))
			}
		}
	}
	return out
}

// A proxy with Options.SharedMessages digests a snapshot as digestOf does (the same shape, route
// sums and cluster sums, so the builder shares the same parts) while hashing only the virtual
// hosts and clusters that are new messages: snapshots here share the others with the previous
// one, as the translator's and the agent's do, and replace one or two at each step.
func TestRememberedSumsEqualDigest(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	serial := 0
	newVH := func() *irv1.VirtualHost {
		serial++
		vh := &irv1.VirtualHost{Hostname: fmt.Sprintf("h%d.example", serial)}
		for j := range 1 + r.IntN(3) {
			vh.Routes = append(vh.Routes, &irv1.Route{Name: fmt.Sprintf("r%d-%d", serial, j),
				Backends: []*irv1.Backend{{Cluster: fmt.Sprintf("c%d", r.IntN(4)), Weight: 1}}})
		}
		return vh
	}
	newCluster := func(i int) *irv1.Cluster {
		return &irv1.Cluster{Name: fmt.Sprintf("c%d", i), ConnectTimeoutMs: uint32(r.IntN(3)),
			Endpoints: []*irv1.Endpoint{{Address: "127.0.0.1", Port: uint32(r.IntN(100))}}}
	}
	vhs := make([]*irv1.VirtualHost, 600) // about ten runs (shape.go)
	for i := range vhs {
		vhs[i] = newVH()
	}
	clusters := make([]*irv1.Cluster, 4)
	for i := range clusters {
		clusters[i] = newCluster(i)
	}
	m := &partSums{}
	for step := range 40 {
		changed := 0
		if step > 0 {
			switch r.IntN(5) {
			case 4: // one more at the end: the last run was cut by the list's end, not its content
				vhs = append(vhs, newVH())
				changed = 1
			case 3: // many gone at once: the rest shift further than the proxy looks ahead
				if len(vhs) > 60 {
					i := r.IntN(len(vhs) - 45)
					vhs = slices.Delete(vhs, i, i+45)
				}
			case 0:
				vhs[r.IntN(len(vhs))] = newVH()
				changed = 1
			case 1:
				i := r.IntN(len(vhs))
				vhs = append(vhs[:i:i], vhs[i+1:]...) // a virtual host gone
				vhs = append(vhs, newVH())
				changed = 1
			default:
				i := r.IntN(len(clusters))
				clusters[i] = newCluster(i)
				changed = 1
			}
		}
		snap := &irv1.Snapshot{
			Listeners: []*irv1.Listener{{Name: "l", Port: 80, Protocol: "HTTP",
				Servers: []*irv1.Server{{VirtualHosts: slices.Clone(vhs)}}}},
			Clusters: slices.Clone(clusters),
		}
		got, want := m.digest(snap), digestOf(snap)
		if got.shape != want.shape || !slices.EqualFunc(runSums(got), runSums(want), slices.Equal[[]sum]) || !slices.Equal(got.clusters, want.clusters) {
			t.Fatalf("step %d: the remembered digest differs from digestOf", step)
		}
		if step > 0 && m.fresh != changed {
			t.Fatalf("step %d: hashed %d virtual hosts and clusters, want %d (the new messages only)", step, m.fresh, changed)
		}
	}
}
