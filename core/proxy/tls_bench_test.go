package proxy_test

import (
	"net/http"
	"testing"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
)

// The TLS-terminating paths: what a new connection costs on listener.tls in Terminate mode and on
// listener.https (a full handshake with the listener's certificate each op). The passthrough
// figures are in l4_bench_test.go.

// BenchmarkTLSTerminateConnectionRate opens one terminated TLSRoute connection per op: ClientHello
// peek, handshake with the server's certificate, one line from a TCP backend.
func BenchmarkTLSTerminateConnectionRate(b *testing.B) {
	be := newTCPEcho(b, "term")
	l := l4Listener("TLS", 0, tlsServer("*.example.com", []string{"ns/c"},
		vhost("*.example.com", l4Route("route.tls", "r", backend("s", 1)))))
	p := newL4Proxy(b, proxy.Limits{})
	apply(b, p, snapshot(b, []*irv1.Listener{l}, []*irv1.Cluster{l4Cluster("s", irv1.Cluster_TCP, be.port)},
		secret(b, "ns/c", "c", "*.example.com")))
	addr := addrOf(b, p, l.Name)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, line, err := tlsGreeting(addr, "a.example.com", nil); err != nil || line != "term" {
				b.Errorf("%q %v", line, err)
				return
			}
		}
	})
}

// BenchmarkHTTPSConnectionRate sends one HTTP/1.1 request per op on a new TLS connection to
// listener.https (keep-alive off): handshake, routing, forwarding.
func BenchmarkHTTPSConnectionRate(b *testing.B) {
	be := newBackend(b, "be", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	l := httpsListener(0, tlsServer("", []string{"ns/c"}, vhost("", route("r", "/", backend("be", 1)))))
	p := newL4Proxy(b, proxy.Limits{})
	apply(b, p, snapshot(b, []*irv1.Listener{l}, []*irv1.Cluster{cluster("be", be)}, secret(b, "ns/c", "c", "example.com")))
	c := newClient(addrOf(b, p, l.Name), func(tr *http.Transport) { tr.DisableKeepAlives = true })
	url := hostURL("https", "example.com", "/bench")
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if r := c.get(url); r.err != nil || r.status != 200 {
				b.Errorf("%d %v", r.status, r.err)
				return
			}
		}
	})
}
