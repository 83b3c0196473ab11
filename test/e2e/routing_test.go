package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// routingRoutes exercises every match kind, cross-route precedence, hostnames and every filter.
// b1..b5 are backend Services.
const routingRoutes = `
# paths, methods, query and headers in one route; rule order does not matter, precedence does.
%[1]s
  rules:
  - matches: [{path: {type: Exact, value: /exact}}]
    backendRefs: [{name: b1, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /prefix}}]
    backendRefs: [{name: b2, port: 80}]
  - matches: [{path: {type: RegularExpression, value: "/re/[0-9]+"}}]
    backendRefs: [{name: b3, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /method}}]
    backendRefs: [{name: b5, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /method}, method: POST}]
    backendRefs: [{name: b4, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /q}}]
    backendRefs: [{name: b2, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /q}, queryParams: [{name: v, value: "yes"}]}]
    backendRefs: [{name: b1, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /h}}]
    backendRefs: [{name: b5, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /h}, headers: [{name: x-h, value: v}]}]
    backendRefs: [{name: b3, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /h}, headers: [{name: x-r, type: RegularExpression, value: "^ab+c$"}]}]
    backendRefs: [{name: b4, port: 80}]
---
%[2]s
  rules:
  - matches: [{path: {type: PathPrefix, value: /p}}, {path: {type: PathPrefix, value: /tie}}]
    backendRefs: [{name: b1, port: 80}]
---
%[3]s
  rules:
  - matches: [{path: {type: PathPrefix, value: /p/longer}}]
    backendRefs: [{name: b2, port: 80}]
  - matches: [{path: {type: Exact, value: /p/exact}}]
    backendRefs: [{name: b3, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /tie}}]
    backendRefs: [{name: b2, port: 80}]
---
%[4]s
  hostnames: [foo.example.com]
  rules:
  - matches: [{path: {type: PathPrefix, value: /host}}]
    backendRefs: [{name: b1, port: 80}]
---
%[5]s
  hostnames: ["*.example.com"]
  rules:
  - matches: [{path: {type: PathPrefix, value: /host}}]
    backendRefs: [{name: b2, port: 80}]
---
%[6]s
  rules:
  - matches: [{path: {type: PathPrefix, value: /weights}}]
    backendRefs: [{name: b1, port: 80, weight: 3}, {name: b2, port: 80, weight: 1}, {name: b3, port: 80, weight: 0}]
---
%[7]s
  rules:
  - matches: [{path: {type: PathPrefix, value: /reqhdr}}]
    filters:
    - type: RequestHeaderModifier
      requestHeaderModifier:
        set: [{name: x-set, value: set-by-proxy}]
        add: [{name: x-add, value: added}]
        remove: [x-del]
    backendRefs: [{name: b1, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /resphdr}}]
    filters:
    - type: ResponseHeaderModifier
      responseHeaderModifier:
        set: [{name: x-resp, value: from-proxy}]
        remove: [x-backend]
    backendRefs: [{name: b1, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /redir}}]
    filters:
    - type: RequestRedirect
      requestRedirect:
        hostname: redirected.example.com
        statusCode: 301
        path: {type: ReplacePrefixMatch, replacePrefixMatch: /new}
  - matches: [{path: {type: PathPrefix, value: /redir-full}}]
    filters:
    - type: RequestRedirect
      requestRedirect:
        scheme: https
        path: {type: ReplaceFullPath, replaceFullPath: /full}
  - matches: [{path: {type: PathPrefix, value: /rewrite}}]
    filters:
    - type: URLRewrite
      urlRewrite:
        hostname: rewritten.example.com
        path: {type: ReplacePrefixMatch, replacePrefixMatch: /backend-path}
    backendRefs: [{name: b2, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /rewrite-full}}]
    filters:
    - type: URLRewrite
      urlRewrite:
        path: {type: ReplaceFullPath, replaceFullPath: /whole}
    backendRefs: [{name: b2, port: 80}]
---
%[8]s
  rules:
  - matches: [{path: {type: PathPrefix, value: /tls}}]
    backendRefs: [{name: b1, port: 80}]
`

// routingSetup starts five backends and a coxswain serving routingRoutes on an HTTP port and two
// HTTPS listeners sharing one port, told apart by SNI.
func routingSetup(t *testing.T) (s *server, httpPort, httpsPort int, roots *x509.CertPool) {
	bs := make([]*backend, 5)
	for i := range bs {
		bs[i] = startBackend(t, fmt.Sprintf("b%d", i+1))
	}
	httpPort, httpsPort = freePort(t), freePort(t)
	certA, keyA := selfSigned(t, "a.example.com")
	certB, keyB := selfSigned(t, "b.example.com")
	roots = x509.NewCertPool()
	roots.AppendCertsFromPEM(certA)
	roots.AppendCertsFromPEM(certB)
	routes := fmt.Sprintf(routingRoutes,
		routeYAML("matches", "", ""),
		routeYAML("precedence-old", "2024-01-01T00:00:00Z", ""),
		routeYAML("precedence-new", "2024-06-01T00:00:00Z", ""),
		routeYAML("host-exact", "", ""),
		routeYAML("host-wildcard", "", ""),
		routeYAML("weights", "", ""),
		routeYAML("filters", "", ""),
		routeYAML("tls", "", ""),
	)
	s = startServe(t, map[string]string{
		"gateway.yaml": gatewayClassYAML + "---\n" + gatewayYAML(
			listener{name: "http", protocol: "HTTP", port: httpPort},
			listener{name: "https-a", protocol: "HTTPS", port: httpsPort, hostname: "a.example.com", certSecret: "cert-a"},
			listener{name: "https-b", protocol: "HTTPS", port: httpsPort, hostname: "b.example.com", certSecret: "cert-b"},
		),
		"secrets/a.yaml":     tlsSecretYAML("cert-a", certA, keyA),
		"secrets/b.yaml":     tlsSecretYAML("cert-b", certB, keyB),
		"backends.yaml":      servicesYAML(bs...),
		"routes/routes.yaml": routes,
	})
	if st := s.status(); len(st.Report.Problems) > 0 || len(st.Report.LoadErrors) > 0 {
		t.Fatalf("the routing manifests should be valid: %+v", st.Report)
	}
	return s, httpPort, httpsPort, roots
}

func TestRouting(t *testing.T) {
	_, httpPort, httpsPort, roots := routingSetup(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	ctx := context.Background()
	client := &http.Client{Timeout: 10 * time.Second}

	t.Run("matches", func(t *testing.T) {
		tests := []struct {
			name string
			req  request
			want string // backend name, or "404"
		}{
			{"exact", request{url: base + "/exact"}, "b1"},
			{"exact is not a prefix", request{url: base + "/exact/more"}, "404"},
			{"prefix", request{url: base + "/prefix/a/b"}, "b2"},
			{"prefix is element-wise", request{url: base + "/prefixes"}, "404"},
			{"regex", request{url: base + "/re/123"}, "b3"},
			{"regex is anchored", request{url: base + "/re/123x"}, "404"},
			{"method match wins", request{method: "POST", url: base + "/method"}, "b4"},
			{"other method", request{url: base + "/method"}, "b5"},
			{"query match wins", request{url: base + "/q?v=yes"}, "b1"},
			{"query mismatch", request{url: base + "/q?v=no"}, "b2"},
			{"header exact", request{url: base + "/h", headers: map[string]string{"X-H": "v"}}, "b3"},
			{"header exact mismatch", request{url: base + "/h", headers: map[string]string{"X-H": "w"}}, "b5"},
			{"header regex", request{url: base + "/h", headers: map[string]string{"x-r": "abbbc"}}, "b4"},
			{"header regex mismatch", request{url: base + "/h", headers: map[string]string{"x-r": "ac"}}, "b5"},
			{"longest prefix across routes", request{url: base + "/p/longer/x"}, "b2"},
			{"shorter prefix", request{url: base + "/p/other"}, "b1"},
			{"exact beats prefix across routes", request{url: base + "/p/exact"}, "b3"},
			{"tie goes to the oldest route", request{url: base + "/tie"}, "b1"},
			{"exact hostname", request{url: base + "/host", host: "foo.example.com"}, "b1"},
			{"wildcard hostname", request{url: base + "/host", host: "bar.example.com"}, "b2"},
			{"wildcard matches several labels", request{url: base + "/host", host: "a.b.example.com"}, "b2"},
			{"wildcard does not match the apex", request{url: base + "/host", host: "example.com"}, "404"},
			{"hostname with port", request{url: base + "/host", host: fmt.Sprintf("foo.example.com:%d", httpPort)}, "b1"},
			{"no route", request{url: base + "/nothing"}, "404"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				res, err := do(ctx, client, tc.req)
				if err != nil {
					t.Fatal(err)
				}
				got := res.backendOf()
				if tc.want == "404" {
					if res.code != http.StatusNotFound {
						t.Errorf("got %s, want 404", got)
					}
					return
				}
				if got != tc.want {
					t.Errorf("got %s, want %s", got, tc.want)
				}
			})
		}
	})

	t.Run("weights", func(t *testing.T) {
		const n = 400
		counts := map[string]int{}
		for i := 0; i < n; i++ {
			res, err := do(ctx, client, request{url: base + "/weights"})
			if err != nil {
				t.Fatal(err)
			}
			counts[res.backendOf()]++
		}
		// 3:1:0. Smooth weighted round robin makes this nearly exact; the tolerance covers any
		// balancer that is only statistically fair.
		if counts["b1"] < 270 || counts["b1"] > 330 || counts["b2"] < 70 || counts["b2"] > 130 || counts["b3"] != 0 ||
			counts["b1"]+counts["b2"] != n {
			t.Errorf("weights 3:1:0 over %d requests gave %v", n, counts)
		}
	})

	t.Run("filters", func(t *testing.T) {
		res, err := do(ctx, client, request{url: base + "/reqhdr", headers: map[string]string{"x-set": "client", "x-add": "client", "x-del": "gone"}})
		if err != nil {
			t.Fatal(err)
		}
		h := res.echo.Headers
		if got := h["X-Set"]; len(got) != 1 || got[0] != "set-by-proxy" {
			t.Errorf("x-set = %v", got)
		}
		if got := h["X-Add"]; len(got) != 2 || got[0] != "client" || got[1] != "added" {
			t.Errorf("x-add = %v", got)
		}
		if got, ok := h["X-Del"]; ok {
			t.Errorf("x-del not removed: %v", got)
		}

		res, err = do(ctx, client, request{url: base + "/resphdr"})
		if err != nil {
			t.Fatal(err)
		}
		if res.header.Get("X-Resp") != "from-proxy" || res.header.Get("X-Backend") != "" || res.echo == nil {
			t.Errorf("response headers = %v", res.header)
		}

		res, err = do(ctx, noRedirect, request{url: base + "/redir/rest?x=1"})
		if err != nil {
			t.Fatal(err)
		}
		loc, _ := url.Parse(res.header.Get("Location"))
		if res.code != http.StatusMovedPermanently || loc == nil || loc.Scheme != "http" ||
			loc.Host != fmt.Sprintf("redirected.example.com:%d", httpPort) || loc.Path != "/new/rest" || loc.RawQuery != "x=1" {
			t.Errorf("redirect = %d %q", res.code, res.header.Get("Location"))
		}

		res, err = do(ctx, noRedirect, request{url: base + "/redir-full/a", host: "site.example.org"})
		if err != nil {
			t.Fatal(err)
		}
		if got := res.header.Get("Location"); res.code != http.StatusFound || got != "https://site.example.org/full" {
			t.Errorf("scheme redirect = %d %q, want 302 https://site.example.org/full", res.code, got)
		}

		res, err = do(ctx, client, request{url: base + "/rewrite/x/y?q=1"})
		if err != nil {
			t.Fatal(err)
		}
		if res.echo == nil || res.echo.Path != "/backend-path/x/y" || res.echo.Host != "rewritten.example.com" || res.echo.Query != "q=1" {
			t.Errorf("rewrite: backend saw %+v", res.echo)
		}

		res, err = do(ctx, client, request{url: base + "/rewrite-full/x/y"})
		if err != nil {
			t.Fatal(err)
		}
		if res.echo == nil || res.echo.Path != "/whole" {
			t.Errorf("full rewrite: backend saw %+v", res.echo)
		}
	})

	t.Run("https SNI on a shared port", func(t *testing.T) {
		for _, host := range []string{"a.example.com", "b.example.com"} {
			t.Run(host, func(t *testing.T) {
				tr := &http.Transport{
					TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: host, MinVersion: tls.VersionTLS12},
					DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
						return (&net.Dialer{}).DialContext(ctx, network, fmt.Sprintf("127.0.0.1:%d", httpsPort))
					},
				}
				defer tr.CloseIdleConnections()
				c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://%s:%d/tls", host, httpsPort), nil)
				if err != nil {
					t.Fatal(err)
				}
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = resp.Body.Close() }()
				if cn := resp.TLS.PeerCertificates[0].Subject.CommonName; cn != host {
					t.Errorf("SNI %s was answered with the certificate of %s", host, cn)
				}
				if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Backend") != "b1" {
					t.Errorf("GET /tls over %s = %d from %q", host, resp.StatusCode, resp.Header.Get("X-Backend"))
				}
				if !strings.HasPrefix(resp.Proto, "HTTP/") {
					t.Errorf("proto %s", resp.Proto)
				}
			})
		}
	})
}
