package proxy_test

import (
	"net/http"
	"testing"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// TestMisdirectedRequest: on an HTTPS port, a request whose Host belongs to another listener
// (Server) than the connection's TLS server name is answered 421, over HTTP/1.1 and HTTP/2 alike.
func TestMisdirectedRequest(t *testing.T) {
	ok := newBackend(t, "ok", nil)
	secrets := []*irv1.Secret{
		secret(t, "ns/a", "a", "a.example.com"),
		secret(t, "ns/wild", "wild", "*.example.com"),
		secret(t, "ns/default", "default", "default.test"),
	}
	to := backend("ok", 1)
	ln := httpsListener(0,
		tlsServer("a.example.com", []string{"ns/a"}, vhost("a.example.com", route("r/a", "/", to))),
		tlsServer("*.example.com", []string{"ns/wild"}, vhost("*.example.com", route("r/wild", "/", to))),
		tlsServer("", []string{"ns/default"}, vhost("", route("r/default", "/", to))),
	)
	p := newProxy(t)
	apply(t, p, snapshot(t, []*irv1.Listener{ln}, []*irv1.Cluster{cluster("ok", ok)}, secrets...))
	addr := addrOf(t, p, ln.Name)

	cases := []struct {
		name, sni, host string
		want            int
	}{
		{"host of the SNI's listener", "a.example.com", "a.example.com", http.StatusOK},
		{"another host of the same wildcard listener", "b.example.com", "c.example.com", http.StatusOK},
		{"host of a more specific listener", "b.example.com", "a.example.com", http.StatusMisdirectedRequest},
		{"host of a less specific listener", "a.example.com", "b.example.com", http.StatusMisdirectedRequest},
		{"catch-all SNI, host of a named listener", "other.org", "a.example.com", http.StatusMisdirectedRequest},
		{"named SNI, host only the catch-all takes", "a.example.com", "other.org", http.StatusMisdirectedRequest},
		{"catch-all SNI and host", "other.org", "else.org", http.StatusOK},
		{"no SNI: the connection belongs to no listener", "", "a.example.com", http.StatusOK},
	}
	for _, proto := range []struct {
		name string
		h2   bool
	}{{"HTTP/1.1", false}, {"HTTP/2", true}} {
		for _, tc := range cases {
			t.Run(proto.name+"/"+tc.name, func(t *testing.T) {
				c := newClient(addr, func(tr *http.Transport) {
					tr.ForceAttemptHTTP2 = proto.h2
					tr.TLSClientConfig.ServerName = tc.sni
				})
				// An IP address in the URL: no SNI unless ServerName sets one.
				r := must(t, c.get(hostURL("https", "127.0.0.1", "/"), "Host", tc.host))
				if r.status != tc.want {
					t.Fatalf("SNI %q Host %q: status %d, want %d (%s)", tc.sni, tc.host, r.status, tc.want, r.body)
				}
			})
		}
	}
}
