package translate

import (
	"encoding/json"
	"testing"

	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func pathMatch(typ gwapiv1.PathMatchType, v string) gwapiv1.HTTPRouteMatch {
	return gwapiv1.HTTPRouteMatch{Path: &gwapiv1.HTTPPathMatch{Type: &typ, Value: &v}}
}

func withMethod(m gwapiv1.HTTPRouteMatch, method gwapiv1.HTTPMethod) gwapiv1.HTTPRouteMatch {
	m.Method = &method
	return m
}

func withHeaders(m gwapiv1.HTTPRouteMatch, names ...string) gwapiv1.HTTPRouteMatch {
	for _, n := range names {
		m.Headers = append(m.Headers, gwapiv1.HTTPHeaderMatch{Name: gwapiv1.HTTPHeaderName(n), Value: "v"})
	}
	return m
}

func withQuery(m gwapiv1.HTTPRouteMatch, names ...string) gwapiv1.HTTPRouteMatch {
	for _, n := range names {
		m.QueryParams = append(m.QueryParams, gwapiv1.HTTPQueryParamMatch{Name: gwapiv1.HTTPHeaderName(n), Value: "v"})
	}
	return m
}

// TestPrecedenceVector checks the HTTPRoute precedence rules as vectors; the core compares
// them element-wise (larger wins) and breaks full ties by route age, name, rule and match.
func TestPrecedenceVector(t *testing.T) {
	prefix := func(v string) gwapiv1.HTTPRouteMatch { return pathMatch(gwapiv1.PathMatchPathPrefix, v) }
	cases := []struct {
		name          string
		higher, lower gwapiv1.HTTPRouteMatch
	}{
		{"spec: Exact path beats PathPrefix of the same value", pathMatch(gwapiv1.PathMatchExact, "/a"), prefix("/a")},
		{"spec: Exact path beats a longer PathPrefix", pathMatch(gwapiv1.PathMatchExact, "/a"), prefix("/abcdef")},
		{"ours: RegularExpression beats PathPrefix", pathMatch(gwapiv1.PathMatchRegularExpression, "/.*"), prefix("/abcdef")},
		{"ours: Exact beats RegularExpression", pathMatch(gwapiv1.PathMatchExact, "/a"), pathMatch(gwapiv1.PathMatchRegularExpression, "/a.*")},
		{"spec: longest PathPrefix (characters) wins", prefix("/abc"), prefix("/ab")},
		{"spec: path beats method", prefix("/abc"), withMethod(prefix("/ab"), gwapiv1.HTTPMethodGet)},
		{"spec: method beats headers", withMethod(prefix("/a"), gwapiv1.HTTPMethodGet), withHeaders(prefix("/a"), "x", "y")},
		{"spec: more headers win", withHeaders(prefix("/a"), "x", "y"), withHeaders(prefix("/a"), "x")},
		{"spec: headers beat query params", withHeaders(prefix("/a"), "x"), withQuery(prefix("/a"), "q", "r")},
		{"spec: more query params win", withQuery(prefix("/a"), "q", "r"), withQuery(prefix("/a"), "q")},
		{"spec: equivalent header names count once", withHeaders(prefix("/a"), "x", "y"), withHeaders(prefix("/a"), "x", "X")},
		{"default match is PathPrefix /, the lowest path", prefix("/a"), gwapiv1.HTTPRouteMatch{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, hi, err := translateMatch(c.higher)
			if err != nil {
				t.Fatal(err.msg)
			}
			_, lo, err := translateMatch(c.lower)
			if err != nil {
				t.Fatal(err.msg)
			}
			if compare(hi, lo) <= 0 {
				t.Errorf("precedence %v should beat %v", hi, lo)
			}
		})
	}
}

func compare(a, b []int) int {
	for i := range a {
		if a[i] != b[i] {
			if a[i] > b[i] {
				return 1
			}
			return -1
		}
	}
	return 0
}

// TestMatchValidation covers what the API server's CEL would reject.
func TestMatchValidation(t *testing.T) {
	cases := []struct {
		name  string
		match gwapiv1.HTTPRouteMatch
		field string
	}{
		{"invalid RE2 path regex", pathMatch(gwapiv1.PathMatchRegularExpression, "("), "path.value"},
		{"relative path", pathMatch(gwapiv1.PathMatchPathPrefix, "a"), "path.value"},
		{"double slash", pathMatch(gwapiv1.PathMatchExact, "/a//b"), "path.value"},
		{"encoded slash", pathMatch(gwapiv1.PathMatchExact, "/a%2fb"), "path.value"},
		{"dot segment", pathMatch(gwapiv1.PathMatchPathPrefix, "/a/.."), "path.value"},
		{"space", pathMatch(gwapiv1.PathMatchPathPrefix, "/a b"), "path.value"},
		{"unknown path type", pathMatch("Glob", "/a"), "path.type"},
		{"unknown method", withMethod(prefix1(), "FETCH"), "method"},
		{"bad header name", withHeaders(prefix1(), "a b"), "headers[0].name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := translateMatch(c.match)
			if err == nil || err.field != c.field {
				t.Fatalf("got %+v, want an error at %s", err, c.field)
			}
		})
	}
	if _, _, err := translateMatch(pathMatch(gwapiv1.PathMatchRegularExpression, `/v[0-9]+/(a|b)`)); err != nil {
		t.Errorf("valid regex rejected: %s", err.msg)
	}
}

func prefix1() gwapiv1.HTTPRouteMatch { return pathMatch(gwapiv1.PathMatchPathPrefix, "/") }
