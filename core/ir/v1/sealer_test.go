package irv1

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"
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
	vhs := make([]*VirtualHost, 40)
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
	for step := range 30 {
		vhs[r.IntN(len(vhs))] = newVH(r.IntN(1000)) // a changed virtual host: a new message
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
		if step == 10 {
			// Field 99 of a Server, as a newer controller might add: kept and hashed.
			snap.Listeners[0].Servers[0].ProtoReflect().SetUnknown([]byte{0x9a, 0x06, 0x01, 'x'})
		}
		if step == 20 {
			s.Forget()
		}
		want := proto.Clone(snap).(*Snapshot)
		if err := Seal(want); err != nil {
			t.Fatal(err)
		}
		if err := s.Seal(snap); err != nil {
			t.Fatal(err)
		}
		if snap.GetVersion() != want.GetVersion() {
			t.Fatalf("step %d: Sealer gives %s, Seal %s", step, snap.GetVersion(), want.GetVersion())
		}
		if step == 5 { // sealing the same snapshot again, all from remembered encodings
			if err := s.Seal(snap); err != nil || snap.GetVersion() != want.GetVersion() {
				t.Fatalf("resealed: %s, %v; want %s", snap.GetVersion(), err, want.GetVersion())
			}
		}
	}
}
