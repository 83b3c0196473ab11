package discovery

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// The lower bound that spares a push sizing the whole snapshot is never above the size, and
// larger answers as the exact comparison would on both sides of the size, whether names are a
// small part of the encoding or almost all of it.
func TestLargerAgreesWithTheSize(t *testing.T) {
	for _, c := range []struct {
		name   string
		routes bool // routes and clusters with endpoints: names are a small part of the encoding
	}{{"names-and-routes", true}, {"names-only", false}} {
		t.Run(c.name, func(t *testing.T) {
			snap := &irv1.Snapshot{Secrets: []*irv1.Secret{{Name: "ns/cert", CertificatePem: []byte("pem")}}}
			for l := range 2 {
				ln := &irv1.Listener{Name: fmt.Sprintf("listener-%d", l)}
				srv := &irv1.Server{Hostname: "*.example.com"}
				for v := range 50 {
					vh := &irv1.VirtualHost{Hostname: fmt.Sprintf("host-%d-%d.example.com", l, v)}
					if c.routes {
						vh.Routes = []*irv1.Route{{Name: fmt.Sprintf("ns/route-%d", v)}}
					}
					srv.VirtualHosts = append(srv.VirtualHosts, vh)
				}
				ln.Servers = []*irv1.Server{srv, {}}
				snap.Listeners = append(snap.Listeners, ln)
			}
			for i := range 20 {
				cl := &irv1.Cluster{Name: fmt.Sprintf("ns/svc-%d:80", i)}
				if c.routes {
					cl.Endpoints = []*irv1.Endpoint{{Address: "10.0.0.1", Port: 8080}}
				}
				snap.Clusters = append(snap.Clusters, cl)
			}
			size := proto.Size(snap)
			if bound := namesLength(snap); bound > size || bound == 0 {
				t.Fatalf("names add up to %d bytes, the encoding is %d", bound, size)
			}
			p := &prepared{snap: snap}
			for _, n := range []int{0, 300, size - 1, size, size + 1, 10 * size} {
				if got, want := p.larger(n), n < size; got != want {
					t.Errorf("larger(%d) = %v with a %d-byte encoding", n, got, size)
				}
			}
		})
	}
}
