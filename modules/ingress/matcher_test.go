package ingress

import (
	"net/http/httptest"
	"testing"

	"github.com/coxswain-labs/coxswain/modules/httproute"
)

func TestHostAndPath(t *testing.T) {
	prefix := httproute.Match{Path: &httproute.PathMatch{Type: httproute.MatchPathPrefix, Value: "/foo"}}
	cases := []struct {
		name, host, reqHost, path string
		want                      bool
	}{
		{"any host", "", "x.y", "/foo/bar", true},
		{"exact host", "a.example.com", "A.Example.com:8080", "/foo", true},
		{"exact host other", "a.example.com", "b.example.com", "/foo", false},
		{"wildcard one label", "*.example.com", "a.example.com", "/foo", true},
		{"wildcard with port", "*.example.com", "a.example.com:80", "/foo", true},
		{"wildcard two labels", "*.example.com", "a.b.example.com", "/foo", false},
		{"wildcard apex", "*.example.com", "example.com", "/foo", false},
		{"wildcard empty label", "*.example.com", ".example.com", "/foo", false},
		{"prefix element-wise", "", "h", "/foobar", false},
		{"trailing dot", "a.example.com", "a.example.com.", "/foo/", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := &Matcher{config: Match{Host: c.host, Match: prefix}}
			if err := m.Provision(nil); err != nil {
				t.Fatal(err)
			}
			r := httptest.NewRequest("GET", "http://placeholder"+c.path, nil)
			r.Host = c.reqHost
			if got := m.Match(r); got != c.want {
				t.Fatalf("Match(%s %s) = %v, want %v", c.reqHost, c.path, got, c.want)
			}
		})
	}
}

func TestBadHost(t *testing.T) {
	for _, h := range []string{"a.*.com", "**.x", "*"} {
		m := &Matcher{config: Match{Host: h}}
		if err := m.Provision(nil); err == nil {
			t.Errorf("host %q provisioned", h)
		}
	}
}

func BenchmarkWildcardMatch(b *testing.B) {
	m := &Matcher{config: Match{Host: "*.example.com", Match: httproute.Match{Path: &httproute.PathMatch{Type: httproute.MatchPathPrefix, Value: "/api"}}}}
	if err := m.Provision(nil); err != nil {
		b.Fatal(err)
	}
	r := httptest.NewRequest("GET", "http://a.example.com/api/v1", nil)
	b.ReportAllocs()
	for b.Loop() {
		m.Match(r)
	}
}

// BenchmarkSameAsHTTPRoute is route.http's matcher on the same path: the Ingress matcher's cost
// over it is the host check alone.
func BenchmarkSameAsHTTPRoute(b *testing.B) {
	m, err := httproute.New(httproute.Match{Path: &httproute.PathMatch{Type: httproute.MatchPathPrefix, Value: "/api"}})
	if err != nil {
		b.Fatal(err)
	}
	r := httptest.NewRequest("GET", "http://a.example.com/api/v1", nil)
	b.ReportAllocs()
	for b.Loop() {
		m.Match(r)
	}
}
