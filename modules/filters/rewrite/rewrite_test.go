package rewrite

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"strings"
	"testing"

	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/modules/filters/pathmod"
)

func newRewrite(t testing.TB, c Config) *Rewrite {
	t.Helper()
	f := &Rewrite{Config: c}
	if err := f.Provision(nil); err != nil {
		t.Fatalf("Provision: %v", err)
	}
	if err := f.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	return f
}

func prefix(matched, replace string) *pathmod.Modifier {
	return &pathmod.Modifier{Type: pathmod.ReplacePrefixMatch, MatchedPrefix: matched, ReplacePrefixMatch: replace}
}

func full(p string) *pathmod.Modifier {
	return &pathmod.Modifier{Type: pathmod.ReplaceFullPath, ReplaceFullPath: p}
}

type rewriteCase struct {
	name     string
	config   Config
	target   string
	host     string
	wantURI  string // escaped path and query the backend receives
	wantHost string
}

// TestConformance replays httproute-rewrite-path and httproute-rewrite-host.
func TestConformance(t *testing.T) {
	tests := []rewriteCase{
		{"path: replace prefix", Config{Path: prefix("/prefix/one", "/one")}, "/prefix/one/two", "gw", "/one/two", "gw"},
		{"path: strip prefix, child", Config{Path: prefix("/strip-prefix", "/")}, "/strip-prefix/three", "gw", "/three", "gw"},
		{"path: strip prefix, bare", Config{Path: prefix("/strip-prefix", "/")}, "/strip-prefix", "gw", "/", "gw"},
		{"path: replace full path", Config{Path: full("/one")}, "/full/one/two", "gw", "/one", "gw"},
		{"path: full path with headers", Config{Path: full("/test")}, "/full/rewrite-path-and-modify-headers/test", "gw", "/test", "gw"},
		{"path: prefix with headers", Config{Path: prefix("/prefix/rewrite-path-and-modify-headers", "/prefix")},
			"/prefix/rewrite-path-and-modify-headers/one", "gw", "/prefix/one", "gw"},
		{"host: rewrite", Config{Hostname: "one.example.org"}, "/one", "rewrite.example", "/one", "one.example.org"},
		{"host: rewrite on a rule without matches", Config{Hostname: "example.org"}, "/two", "rewrite.example", "/two", "example.org"},
	}
	runCases(t, tests)
}

func TestRewrite(t *testing.T) {
	tests := []rewriteCase{
		{"query is kept", Config{Path: prefix("/a", "/b")}, "/a/c?x=1&y=2", "gw", "/b/c?x=1&y=2", "gw"},
		{"trailing slash is kept", Config{Path: prefix("/foo", "/xyz")}, "/foo/", "gw", "/xyz/", "gw"},
		{"encoded slash in the rest survives", Config{Path: prefix("/api", "/v2")}, "/api/a%2Fb", "gw", "/v2/a%2Fb", "gw"},
		{"encoded space is re-encoded", Config{Path: prefix("/api", "/v2")}, "/api/a%20b", "gw", "/v2/a%20b", "gw"},
		{"full path drops a stale raw path", Config{Path: full("/plain")}, "/x%2Fy", "gw", "/plain", "gw"},
		{"host and path together", Config{Hostname: "up.example", Path: prefix("/", "/base")}, "/x", "gw", "/base/x", "up.example"},
		{"nothing configured", Config{}, "/x%2Fy?q", "gw", "/x%2Fy?q", "gw"},
	}
	runCases(t, tests)
}

func runCases(t *testing.T, tests []rewriteCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newRewrite(t, tt.config)
			r := httptest.NewRequest(http.MethodGet, tt.target, nil)
			r.Host = tt.host
			if !f.FilterRequest(nil, r) {
				t.Fatal("FilterRequest did not proceed")
			}
			if got := r.URL.RequestURI(); got != tt.wantURI {
				t.Errorf("request URI = %q, want %q", got, tt.wantURI)
			}
			if r.Host != tt.wantHost {
				t.Errorf("Host = %q, want %q", r.Host, tt.wantHost)
			}
		})
	}
}

// TestThroughProxy sends a real request through a loopback reverse proxy that applies the filter,
// to a real backend, and checks what the backend saw on the wire.
func TestThroughProxy(t *testing.T) {
	type seen struct{ uri, host string }
	got := make(chan seen, 1)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- seen{r.RequestURI, r.Host}
	}))
	t.Cleanup(backend.Close)

	f := newRewrite(t, Config{Hostname: "one.example.org", Path: prefix("/prefix/one", "/one")})
	proxy := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			f.FilterRequest(nil, pr.Out)
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = backend.Listener.Addr().String()
		},
	})
	t.Cleanup(proxy.Close)

	resp, err := http.Get(proxy.URL + "/prefix/one/a%2Fb?x=1")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	s := <-got
	if s.uri != "/one/a%2Fb?x=1" || s.host != "one.example.org" {
		t.Errorf("backend saw %q on host %q; want /one/a%%2Fb?x=1 on one.example.org", s.uri, s.host)
	}
}

func TestInvalidConfig(t *testing.T) {
	tests := []struct {
		name   string
		config Config
		want   string
	}{
		{"hostname with space", Config{Hostname: "a b"}, "invalid hostname"},
		{"path modifier without type", Config{Path: &pathmod.Modifier{}}, "without a type"},
		{"relative full path", Config{Path: full("x")}, "does not start with '/'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &Rewrite{Config: tt.config}
			err := f.Provision(nil)
			if err == nil {
				err = f.Validate()
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	reg := core.NewRegistry((*Rewrite)(nil))
	bc := core.NewBuildContext(context.Background(), nil, reg, nil)
	t.Cleanup(func() { _ = bc.Close() })
	if _, err := core.Load[core.HTTPRequestFilter](bc, core.MustConfig(ModuleID, Config{Path: full("/x")})); err != nil {
		t.Errorf("Load: %v", err)
	}
	bad := core.MustConfig(ModuleID, nil)
	bad.Json = []byte(`{"hostname":"a","port":1}`)
	if _, err := core.Load[core.HTTPRequestFilter](bc, bad); err == nil || !strings.Contains(err.Error(), "unknown field") {
		t.Errorf("unknown field: error = %v", err)
	}
	if _, ok := core.Freeze().Lookup(ModuleID); !ok {
		t.Errorf("%s is not registered", ModuleID)
	}
}

func BenchmarkRewritePrefix(b *testing.B) {
	f := newRewrite(b, Config{Hostname: "up.example", Path: prefix("/api", "/v2")})
	r := httptest.NewRequest(http.MethodGet, "/api/users/42", nil)
	b.ReportAllocs()
	for b.Loop() {
		r.URL.Path = "/api/users/42"
		f.FilterRequest(nil, r)
	}
}

func BenchmarkRewriteFullPath(b *testing.B) {
	f := newRewrite(b, Config{Path: full("/static")})
	r := httptest.NewRequest(http.MethodGet, "/any/thing", nil)
	b.ReportAllocs()
	for b.Loop() {
		f.FilterRequest(nil, r)
	}
}
