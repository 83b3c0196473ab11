package proxy_test

import (
	"bytes"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// BenchmarkH2CProxy is a request over cleartext HTTP/2 (prior knowledge) from net/http's client
// to net/http's HTTP/2 server, straight ("direct") and through the proxy to an h2c cluster
// ("proxy"): a GET, and a POST of 1 KiB echoed back with a trailer (the shape of a unary gRPC
// call), 8 in flight per GOMAXPROCS over one client connection. Client and backend run in the
// process, so allocs/op includes theirs: the proxy's share is proxy minus direct.
func BenchmarkH2CProxy(b *testing.B) {
	var accepted atomic.Int64
	be, _ := newH2CBackendFunc(b, "be", func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			w.Header().Set("Trailer", "X-Status")
			_, _ = io.Copy(w, r.Body)
			w.Header().Set("X-Status", "0")
			return
		}
		_, _ = w.Write([]byte("ok"))
	}, &accepted)
	cl := cluster("be", be)
	cl.Protocol = irv1.Cluster_H2C
	l := httpListener(0, server("", vhost("", route("r", "/", backend("be", 1)))))
	p := newProxy(b)
	apply(b, p, snapshot(b, []*irv1.Listener{l}, []*irv1.Cluster{cl}))
	body := bytes.Repeat([]byte("x"), 1<<10)
	for _, path := range []struct{ name, addr string }{
		{"direct", be.srv.Listener.Addr().String()}, {"proxy", addrOf(b, p, l.Name)},
	} {
		c := newClient(path.addr, func(tr *http.Transport) {
			var pr http.Protocols
			pr.SetUnencryptedHTTP2(true)
			tr.Protocols = &pr
		})
		for _, post := range []bool{false, true} {
			name := path.name + "/GET"
			if post {
				name = path.name + "/POST-1KiB"
			}
			b.Run(name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetParallelism(8)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						var req *http.Request
						if post {
							req, _ = http.NewRequest(http.MethodPost, hostURL("http", "example.com", "/"), bytes.NewReader(body))
						} else {
							req, _ = http.NewRequest(http.MethodGet, hostURL("http", "example.com", "/"), nil)
						}
						resp, err := c.Do(req)
						if err != nil {
							b.Fatal(err)
						}
						n, _ := io.Copy(io.Discard, resp.Body)
						_ = resp.Body.Close()
						if resp.StatusCode != 200 || (post && (n != int64(len(body)) || resp.Trailer.Get("X-Status") != "0")) {
							b.Fatalf("status %d, %d bytes, trailer %v", resp.StatusCode, n, resp.Trailer)
						}
					}
				})
			})
		}
	}
}
