package httproute

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/coxswain-labs/coxswain/core"
)

// request is one request a case sends: method, target (path and query, as on the wire), Host and
// headers as name/value pairs (a name may repeat).
type request struct {
	method  string
	target  string
	host    string
	headers []string
}

func (q request) build(t testing.TB) *http.Request {
	t.Helper()
	method := q.method
	if method == "" {
		method = http.MethodGet
	}
	r := httptest.NewRequest(method, q.target, nil)
	if q.host != "" {
		r.Host = q.host
	}
	for i := 0; i+1 < len(q.headers); i += 2 {
		r.Header.Add(q.headers[i], q.headers[i+1])
	}
	return r
}

func pathMatch(typ, value string) *PathMatch { return &PathMatch{Type: typ, Value: value} }

func TestMatch(t *testing.T) {
	tests := []struct {
		name  string
		match Match
		req   request
		want  bool
	}{
		// Empty match.
		{"no conditions match every request", Match{}, request{target: "/anything?x=1"}, true},

		// Path: Exact.
		{"exact path equals whole path", Match{Path: pathMatch(MatchExact, "/one")}, request{target: "/one"}, true},
		{"exact path rejects a longer path", Match{Path: pathMatch(MatchExact, "/one")}, request{target: "/one/example"}, false},
		{"exact path rejects a trailing slash", Match{Path: pathMatch(MatchExact, "/two")}, request{target: "/two/"}, false},
		{"exact path is case-sensitive", Match{Path: pathMatch(MatchExact, "/two")}, request{target: "/Two"}, false},
		{"exact path ignores the query", Match{Path: pathMatch(MatchExact, "/one")}, request{target: "/one?a=b"}, true},
		{"exact path value escapes are decoded", Match{Path: pathMatch(MatchExact, "/a%20b")}, request{target: "/a%20b"}, true},
		{"exact path compares the decoded request path", Match{Path: pathMatch(MatchExact, "/a b")}, request{target: "/a%20b"}, true},
		{"exact path is not cleaned", Match{Path: pathMatch(MatchExact, "/b")}, request{target: "/a/../b"}, false},

		// Path: PathPrefix, element-wise.
		{"prefix matches itself", Match{Path: pathMatch(MatchPathPrefix, "/abc")}, request{target: "/abc"}, true},
		{"prefix matches itself with trailing slash", Match{Path: pathMatch(MatchPathPrefix, "/abc")}, request{target: "/abc/"}, true},
		{"prefix matches a child element", Match{Path: pathMatch(MatchPathPrefix, "/abc")}, request{target: "/abc/x"}, true},
		{"prefix does not match a longer element", Match{Path: pathMatch(MatchPathPrefix, "/abc")}, request{target: "/abcd"}, false},
		{"prefix does not match a parent", Match{Path: pathMatch(MatchPathPrefix, "/abc/x")}, request{target: "/abc"}, false},
		{"prefix trailing slash ignored: child", Match{Path: pathMatch(MatchPathPrefix, "/abc/")}, request{target: "/abc/x"}, true},
		{"prefix trailing slash ignored: bare", Match{Path: pathMatch(MatchPathPrefix, "/abc/")}, request{target: "/abc"}, true},
		{"prefix trailing slash ignored: longer element", Match{Path: pathMatch(MatchPathPrefix, "/abc/")}, request{target: "/abcd"}, false},
		{"prefix slash matches root", Match{Path: pathMatch(MatchPathPrefix, "/")}, request{target: "/"}, true},
		{"prefix slash matches everything", Match{Path: pathMatch(MatchPathPrefix, "/")}, request{target: "/v2example"}, true},
		{"prefix defaults when type is empty", Match{Path: pathMatch("", "/v2")}, request{target: "/v2/example"}, true},
		{"prefix default value is slash", Match{Path: pathMatch(MatchPathPrefix, "")}, request{target: "/x"}, true},
		{"prefix is case-sensitive", Match{Path: pathMatch(MatchPathPrefix, "/v2")}, request{target: "/V2"}, false},
		{"prefix must be at the start", Match{Path: pathMatch(MatchPathPrefix, "/v2")}, request{target: "/foo/v2/example"}, false},
		{"prefix multi-element", Match{Path: pathMatch(MatchPathPrefix, "/prefix/one")}, request{target: "/prefix/one/two"}, true},
		{"prefix multi-element boundary", Match{Path: pathMatch(MatchPathPrefix, "/prefix/one")}, request{target: "/prefix/onetwo"}, false},
		{"prefix value escapes are decoded", Match{Path: pathMatch(MatchPathPrefix, "/caf%C3%A9")}, request{target: "/caf%C3%A9/menu"}, true},

		// Path: RegularExpression, RE2, anchored.
		{"regex path matches whole path", Match{Path: pathMatch(MatchRegularExpression, "/v[0-9]+/.*")}, request{target: "/v12/x"}, true},
		{"regex path is anchored at the start", Match{Path: pathMatch(MatchRegularExpression, "/v[0-9]+")}, request{target: "/x/v1"}, false},
		{"regex path is anchored at the end", Match{Path: pathMatch(MatchRegularExpression, "/v[0-9]+")}, request{target: "/v1/x"}, false},
		{"regex path alternation stays anchored", Match{Path: pathMatch(MatchRegularExpression, "/a|/b")}, request{target: "/a/x"}, false},
		{"regex path alternation matches", Match{Path: pathMatch(MatchRegularExpression, "/a|/b")}, request{target: "/b"}, true},

		// Headers: Exact.
		{"header exact matches", Match{Headers: []ValueMatch{{Name: "version", Value: "one"}}}, request{target: "/", headers: []string{"Version", "one"}}, true},
		{"header name is case-insensitive", Match{Headers: []ValueMatch{{Type: MatchExact, Name: "VERSION", Value: "one"}}}, request{target: "/", headers: []string{"version", "one"}}, true},
		{"header value is case-sensitive", Match{Headers: []ValueMatch{{Name: "Version", Value: "one"}}}, request{target: "/", headers: []string{"Version", "One"}}, false},
		{"header absent does not match", Match{Headers: []ValueMatch{{Name: "Color", Value: "orange"}}}, request{target: "/", headers: []string{"Some-Other-Header", "one"}}, false},
		{"header conditions are ANDed: both", Match{Headers: []ValueMatch{{Name: "Version", Value: "two"}, {Name: "Color", Value: "orange"}}}, request{target: "/", headers: []string{"Version", "two", "Color", "orange"}}, true},
		{"header conditions are ANDed: one", Match{Headers: []ValueMatch{{Name: "Version", Value: "two"}, {Name: "Color", Value: "orange"}}}, request{target: "/", headers: []string{"Color", "orange"}}, false},
		{"header repeated is matched combined", Match{Headers: []ValueMatch{{Name: "X-A", Value: "1,2"}}}, request{target: "/", headers: []string{"X-A", "1", "X-A", "2"}}, true},
		{"header repeated does not match first value alone", Match{Headers: []ValueMatch{{Name: "X-A", Value: "1"}}}, request{target: "/", headers: []string{"X-A", "1", "X-A", "2"}}, false},
		{"header repeated cookie joins with semicolon", Match{Headers: []ValueMatch{{Name: "cookie", Value: "a=1; b=2"}}}, request{target: "/", headers: []string{"Cookie", "a=1", "Cookie", "b=2"}}, true},
		{"header host is the request host", Match{Headers: []ValueMatch{{Name: "host", Value: "foo.example"}}}, request{target: "/", host: "foo.example"}, true},
		{"header host mismatch", Match{Headers: []ValueMatch{{Name: "Host", Value: "foo.example"}}}, request{target: "/", host: "bar.example"}, false},
		{"header first of equivalent names counts", Match{Headers: []ValueMatch{{Name: "version", Value: "one"}, {Name: "Version", Value: "two"}}}, request{target: "/", headers: []string{"Version", "one"}}, true},

		// Headers: RegularExpression, unanchored.
		{"header regex is unanchored", Match{Headers: []ValueMatch{{Type: MatchRegularExpression, Name: "Color", Value: "re"}}}, request{target: "/", headers: []string{"Color", "green"}}, true},
		{"header regex alternation", Match{Headers: []ValueMatch{{Type: MatchRegularExpression, Name: "Color", Value: "^(red|yellow)$"}}}, request{target: "/", headers: []string{"Color", "purple"}}, false},
		{"header regex repeated sees the combination", Match{Headers: []ValueMatch{{Type: MatchRegularExpression, Name: "X-A", Value: "^1,2$"}}}, request{target: "/", headers: []string{"X-A", "1", "X-A", "2"}}, true},
		{"header regex absent does not match even empty pattern", Match{Headers: []ValueMatch{{Type: MatchRegularExpression, Name: "X-A", Value: ""}}}, request{target: "/"}, false},

		// Query parameters.
		{"query exact matches", Match{QueryParams: []ValueMatch{{Name: "animal", Value: "whale"}}}, request{target: "/?animal=whale"}, true},
		{"query exact among others", Match{QueryParams: []ValueMatch{{Name: "animal", Value: "whale"}}}, request{target: "/?otherparam=irrelevant&animal=whale"}, true},
		{"query value mismatch", Match{QueryParams: []ValueMatch{{Name: "animal", Value: "whale"}}}, request{target: "/?animal=dolphin"}, false},
		{"query name is case-sensitive", Match{QueryParams: []ValueMatch{{Name: "animal", Value: "whale"}}}, request{target: "/?ANIMAL=whale"}, false},
		{"query value is case-sensitive", Match{QueryParams: []ValueMatch{{Name: "animal", Value: "whale"}}}, request{target: "/?animal=Whale"}, false},
		{"query value is exact, not a prefix", Match{QueryParams: []ValueMatch{{Name: "animal", Value: "whale"}}}, request{target: "/?animal=whaledolphin"}, false},
		{"query absent does not match", Match{QueryParams: []ValueMatch{{Name: "animal", Value: "whale"}}}, request{target: "/"}, false},
		{"query repeated uses the first value", Match{QueryParams: []ValueMatch{{Name: "a", Value: "1"}}}, request{target: "/?a=1&a=2"}, true},
		{"query repeated ignores later values", Match{QueryParams: []ValueMatch{{Name: "a", Value: "2"}}}, request{target: "/?a=1&a=2"}, false},
		{"query value is unescaped", Match{QueryParams: []ValueMatch{{Name: "q", Value: "a b&c"}}}, request{target: "/?q=a+b%26c"}, true},
		{"query name is unescaped", Match{QueryParams: []ValueMatch{{Name: "a b", Value: "1"}}}, request{target: "/?a%20b=1"}, true},
		{"query pair with semicolon is skipped", Match{QueryParams: []ValueMatch{{Name: "a", Value: "1"}}}, request{target: "/?a=1;b=2"}, false},
		{"query pair with bad escape is skipped", Match{QueryParams: []ValueMatch{{Name: "a", Value: "2"}}}, request{target: "/?a=%zz&a=2"}, true},
		{"query conditions are ANDed", Match{QueryParams: []ValueMatch{{Name: "animal", Value: "dolphin"}, {Name: "color", Value: "blue"}}}, request{target: "/?animal=dolphin&color=yellow"}, false},
		{"query regex is unanchored", Match{QueryParams: []ValueMatch{{Type: MatchRegularExpression, Name: "animal", Value: "hal"}}}, request{target: "/?animal=whale"}, true},
		{"query regex sees the unescaped value", Match{QueryParams: []ValueMatch{{Type: MatchRegularExpression, Name: "q", Value: "^a b$"}}}, request{target: "/?q=a%20b"}, true},

		// Method.
		{"method matches", Match{Method: http.MethodPost}, request{method: http.MethodPost, target: "/"}, true},
		{"method mismatch", Match{Method: http.MethodPost}, request{method: http.MethodGet, target: "/"}, false},

		// All together.
		{"all conditions ANDed", Match{
			Path: pathMatch(MatchPathPrefix, "/path4"), Method: http.MethodGet,
			Headers:     []ValueMatch{{Name: "version", Value: "three"}},
			QueryParams: []ValueMatch{{Name: "animal", Value: "kraken"}},
		}, request{target: "/path4?animal=kraken", headers: []string{"Version", "three"}}, true},
		{"all conditions ANDed, header missing", Match{
			Path:        pathMatch(MatchPathPrefix, "/path4"),
			Headers:     []ValueMatch{{Name: "version", Value: "three"}},
			QueryParams: []ValueMatch{{Name: "animal", Value: "kraken"}},
		}, request{target: "/path4?animal=kraken"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := New(tt.match)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if got := m.Match(tt.req.build(t)); got != tt.want {
				t.Errorf("Match(%s %s) = %v, want %v", tt.req.method, tt.req.target, got, tt.want)
			}
		})
	}
}

func TestMatchEmptyPathIsRoot(t *testing.T) {
	m, err := New(Match{Path: pathMatch(MatchExact, "/")})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodGet, "http://example.com", nil)
	if r.URL.Path != "" {
		t.Fatalf("test premise: path %q", r.URL.Path)
	}
	if !m.Match(r) {
		t.Error("empty path did not match Exact /")
	}
}

func TestInvalidConfig(t *testing.T) {
	tests := []struct {
		name  string
		match Match
		want  string
	}{
		{"unknown path type", Match{Path: pathMatch("Glob", "/x")}, "unsupported match type"},
		{"path without leading slash", Match{Path: pathMatch(MatchExact, "x")}, "does not start with '/'"},
		{"bad path escape", Match{Path: pathMatch(MatchPathPrefix, "/%zz")}, "invalid URL escape"},
		{"bad path regex", Match{Path: pathMatch(MatchRegularExpression, "(")}, "missing closing )"},
		{"bad header name", Match{Headers: []ValueMatch{{Name: "bad name", Value: "x"}}}, "invalid header name"},
		{"header name with colon", Match{Headers: []ValueMatch{{Name: ":method", Value: "x"}}}, "invalid header name"},
		{"header value with newline", Match{Headers: []ValueMatch{{Name: "X", Value: "a\r\nb"}}}, "invalid value"},
		{"unknown header type", Match{Headers: []ValueMatch{{Type: "Prefix", Name: "X", Value: "a"}}}, "unsupported match type"},
		{"bad header regex", Match{Headers: []ValueMatch{{Type: MatchRegularExpression, Name: "X", Value: "["}}}, "missing closing ]"},
		{"empty query name", Match{QueryParams: []ValueMatch{{Value: "a"}}}, "empty name"},
		{"bad query regex", Match{QueryParams: []ValueMatch{{Type: MatchRegularExpression, Name: "a", Value: "*"}}}, "missing argument"},
		{"method not a token", Match{Method: "GET POST"}, "invalid method"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.match)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New() error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

// TestLoad goes through core.Load as the engine does: registry lookup, strict decode, Provision,
// Validate, interface check.
func TestLoad(t *testing.T) {
	reg := core.NewRegistry((*Matcher)(nil))
	bc := core.NewBuildContext(context.Background(), nil, reg, nil)
	t.Cleanup(func() { _ = bc.Close() })

	m, err := core.Load[core.HTTPMatcher](bc, core.MustConfig(ModuleID, Match{
		Path:    pathMatch(MatchPathPrefix, "/api"),
		Headers: []ValueMatch{{Name: "x-env", Value: "prod"}},
	}))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	ok := request{target: "/api/v1", headers: []string{"X-Env", "prod"}}.build(t)
	if !m.Match(ok) {
		t.Error("loaded matcher did not match")
	}

	bad := core.MustConfig(ModuleID, nil)
	bad.Json = []byte(`{"path":{"type":"Exact","value":"/","caseInsensitive":true}}`)
	if _, err := core.Load[core.HTTPMatcher](bc, bad); err == nil || !strings.Contains(err.Error(), "unknown field") {
		t.Errorf("Load with an unknown field: error = %v, want unknown field", err)
	}

	empty := core.MustConfig(ModuleID, nil)
	m, err = core.Load[core.HTTPMatcher](bc, empty)
	if err != nil {
		t.Fatalf("Load empty config: %v", err)
	}
	if !m.Match(request{target: "/x"}.build(t)) {
		t.Error("empty config should match everything")
	}
}

func TestRegistered(t *testing.T) {
	if _, ok := core.Freeze().Lookup(ModuleID); !ok {
		t.Fatalf("%s is not registered", ModuleID)
	}
}
