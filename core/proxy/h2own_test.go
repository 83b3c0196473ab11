package proxy_test

import (
	"net/http"
	"testing"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
)

// TestHTTP2Servers serves HTTP/2 by ALPN and h2c with prior knowledge through both inbound
// HTTP/2 servers Limits.HTTP2Server selects: the own one (the default) and net/http's fallback.
// Either way a request is routed by the current table and reaches the backend over HTTP/1.1.
func TestHTTP2Servers(t *testing.T) {
	be := newBackend(t, "ok", nil)
	to := backend("ok", 1)
	for _, which := range []string{proxy.HTTP2Own, proxy.HTTP2Stdlib} {
		t.Run(which, func(t *testing.T) {
			https := httpsListener(closedPort(t), tlsServer("a.example.com", []string{"ns/a"}, vhost("a.example.com", route("r/a", "/", to))))
			plain := httpListener(0, server("", vhost("", route("r", "/", to))))
			p := newClientProxy(t, proxy.Limits{HTTP2Server: which})
			apply(t, p, snapshot(t, []*irv1.Listener{https, plain}, []*irv1.Cluster{cluster("ok", be)},
				secret(t, "ns/a", "a", "a.example.com")))
			alpn := newClient(addrOf(t, p, https.Name), func(tr *http.Transport) { tr.ForceAttemptHTTP2 = true })
			prior := newClient(addrOf(t, p, plain.Name), func(tr *http.Transport) {
				var pr http.Protocols
				pr.SetUnencryptedHTTP2(true)
				tr.Protocols = &pr
			})
			for name, get := range map[string]func() result{
				"ALPN h2":             func() result { return alpn.get(hostURL("https", "a.example.com", "/x")) },
				"h2c prior knowledge": func() result { return prior.get(hostURL("http", "example.com", "/x")) },
			} {
				r := must(t, get())
				if r.proto != 2 || r.status != http.StatusOK || r.header.Get("X-Backend") != "ok" || r.header.Get("X-Got-Proto") != "HTTP/1.1" {
					t.Fatalf("%s: proto %d status %d backend %q upstream proto %q", name, r.proto, r.status,
						r.header.Get("X-Backend"), r.header.Get("X-Got-Proto"))
				}
			}
		})
	}
}
