package pathregex

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/coxswain-labs/coxswain/core"
)

func newFilter(t testing.TB, c Config) *PathRewriteRegex {
	t.Helper()
	f := &PathRewriteRegex{Config: c}
	if err := f.Provision(nil); err != nil {
		t.Fatalf("Provision: %v", err)
	}
	if err := f.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	return f
}

func TestRewrite(t *testing.T) {
	tests := []struct {
		name     string
		config   Config
		target   string // request target as the client sends it
		wantURI  string // escaped path and query sent upstream
		wantPath string // decoded path later filters see
	}{
		{"numbered group", Config{`^/api/v(\d+)/(.*)$`, "/v$1-api/$2"}, "/api/v2/users", "/v2-api/users", "/v2-api/users"},
		{"braced group before a letter", Config{`^/(\w+)/x$`, "/${1}y"}, "/ab/x", "/aby", "/aby"},
		{"named group", Config{`^/users/(?P<id>\d+)$`, "/u/${id}/profile"}, "/users/42", "/u/42/profile", "/u/42/profile"},
		{"query is kept and not matched", Config{`q=1`, "q=2"}, "/a?q=1", "/a?q=1", "/a"},
		{"query survives a rewrite", Config{`^/old`, "/new"}, "/old/x?a=1&b=%20", "/new/x?a=1&b=%20", "/new/x"},
		{"no match leaves the path", Config{`^/nope`, "/x"}, "/a%2Fb/c?z", "/a%2Fb/c?z", "/a/b/c"},
		{"every match is replaced", Config{`/+`, "/"}, "/a//b///c", "/a/b/c", "/a/b/c"},
		{"encoded slash is not a separator", Config{`^/files/([^/]+)$`, "/blob/$1"}, "/files/a%2Fb", "/blob/a%2Fb", "/blob/a/b"},
		{"pattern sees the escaped form", Config{`%20`, "-"}, "/a%20b", "/a-b", "/a-b"},
		{"empty result becomes the root", Config{`^/strip`, ""}, "/strip", "/", "/"},
		{"relative result gets a slash", Config{`^/`, ""}, "/x/y", "/x/y", "/x/y"},
		{"literal dollar", Config{`^/price$`, "/$$5"}, "/price", "/$5", "/$5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFilter(t, tt.config)
			r := httptest.NewRequest(http.MethodGet, tt.target, nil)
			if !f.FilterRequest(httptest.NewRecorder(), r) {
				t.Fatal("FilterRequest did not proceed")
			}
			if got := r.URL.RequestURI(); got != tt.wantURI {
				t.Errorf("request URI = %q, want %q", got, tt.wantURI)
			}
			if r.URL.Path != tt.wantPath {
				t.Errorf("Path = %q, want %q", r.URL.Path, tt.wantPath)
			}
		})
	}
}

// TestInvalidResult: a substitution that cuts an escape in half must not go upstream.
func TestInvalidResult(t *testing.T) {
	f := newFilter(t, Config{`^/(%2)F(.*)$`, "/$1$2"})
	r := httptest.NewRequest(http.MethodGet, "/%2Fzz", nil)
	w := httptest.NewRecorder()
	if f.FilterRequest(w, r) {
		t.Fatalf("FilterRequest proceeded with path %q", r.URL.EscapedPath())
	}
	if w.Code != http.StatusInternalServerError {
		t.Errorf("status = %d, want 500", w.Code)
	}
}

func TestInvalidConfig(t *testing.T) {
	tests := []struct {
		name   string
		config Config
		want   string
	}{
		{"unbalanced group", Config{Pattern: `^/(a`}, "missing closing )"},
		{"bad repetition", Config{Pattern: `*a`}, "missing argument to repetition operator"},
		{"perl backreference", Config{Pattern: `(a)\1`}, "invalid escape sequence"},
		{"empty pattern", Config{}, "pattern is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &PathRewriteRegex{Config: tt.config}
			err := f.Provision(nil)
			if err == nil {
				err = f.Validate()
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

// TestLoad goes through core.Load: the module's JSON fields are the CRD's spec fields, decoded
// strictly, and the declared resource matches the module ID.
func TestLoad(t *testing.T) {
	reg := core.NewRegistry((*PathRewriteRegex)(nil))
	bc := core.NewBuildContext(context.Background(), nil, reg, nil)
	t.Cleanup(func() { _ = bc.Close() })
	mc := core.MustConfig(ModuleID, nil)
	mc.Json = []byte(`{"pattern":"^/a/(.*)","substitution":"/b/$1"}`)
	if _, err := core.Load[core.HTTPRequestFilter](bc, mc); err != nil {
		t.Errorf("Load: %v", err)
	}
	mc.Json = []byte(`{"pattern":"^/a","replacement":"/b"}`)
	if _, err := core.Load[core.HTTPRequestFilter](bc, mc); err == nil || !strings.Contains(err.Error(), "unknown field") {
		t.Errorf("unknown field: error = %v", err)
	}
	mc.Json = []byte(`{"pattern":"(("}`)
	if _, err := core.Load[core.HTTPRequestFilter](bc, mc); err == nil || !strings.Contains(err.Error(), "missing closing )") {
		t.Errorf("invalid pattern: error = %v, want the compile error", err)
	}
	if err := API.Check(ModuleID); err != nil {
		t.Error(err)
	}
	exts, errs := core.NewRegistry((*PathRewriteRegex)(nil)).Extensions()
	if len(errs) != 0 || exts[ModuleID] != API {
		t.Errorf("Extensions() = %v, %v; want %s: %+v", exts, errs, ModuleID, API)
	}
	if _, ok := core.Freeze().Lookup(ModuleID); !ok {
		t.Errorf("%s is not registered", ModuleID)
	}
}

func benchmark(b *testing.B, c Config, target string) {
	f := newFilter(b, c)
	r := httptest.NewRequest(http.MethodGet, target, nil)
	path, raw := r.URL.Path, r.URL.RawPath
	b.ReportAllocs()
	for b.Loop() {
		r.URL.Path, r.URL.RawPath = path, raw
		f.FilterRequest(nil, r)
	}
}

func BenchmarkRewrite(b *testing.B) {
	benchmark(b, Config{`^/api/v(\d+)/(.*)$`, "/v$1/$2"}, "/api/v2/users/42?x=1")
}

func BenchmarkNoMatch(b *testing.B) {
	benchmark(b, Config{`^/api/v(\d+)/(.*)$`, "/v$1/$2"}, "/static/app.js")
}

func BenchmarkRewriteEscaped(b *testing.B) {
	benchmark(b, Config{`^/files/(.*)$`, "/blob/$1"}, "/files/a%2Fb%20c")
}

// TestNoMatchDoesNotAllocate: a rule's requests that the pattern does not touch pay no
// allocation, which is most of them on a shared rule.
func TestNoMatchDoesNotAllocate(t *testing.T) {
	f := newFilter(t, Config{`^/api/v(\d+)/(.*)$`, "/v$1/$2"})
	r := httptest.NewRequest(http.MethodGet, "/static/app.js?v=3", nil)
	if n := testing.AllocsPerRun(100, func() { f.FilterRequest(nil, r) }); n != 0 {
		t.Errorf("FilterRequest on a path the pattern does not match: %v allocs, want 0", n)
	}
}
