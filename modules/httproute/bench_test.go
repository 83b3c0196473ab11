package httproute

import (
	"net/http"
	"testing"
)

func benchMatch(b *testing.B, match Match, req request) {
	m, err := New(match)
	if err != nil {
		b.Fatal(err)
	}
	r := req.build(b)
	if !m.Match(r) {
		b.Fatal("benchmark request does not match")
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if !m.Match(r) {
			b.Fatal("no match")
		}
	}
}

func BenchmarkMatchPathPrefix(b *testing.B) {
	benchMatch(b, Match{Path: pathMatch(MatchPathPrefix, "/api/v1")}, request{target: "/api/v1/users/42"})
}

func BenchmarkMatchExactHeadersQuery(b *testing.B) {
	benchMatch(b, Match{
		Path:        pathMatch(MatchExact, "/search"),
		Method:      http.MethodGet,
		Headers:     []ValueMatch{{Name: "x-env", Value: "prod"}, {Name: "accept", Value: "a,b"}},
		QueryParams: []ValueMatch{{Name: "q", Value: "hello world"}, {Name: "page", Value: "2"}},
	}, request{target: "/search?lang=en&q=hello+world&page=2", headers: []string{"X-Env", "prod", "Accept", "a", "Accept", "b"}})
}

func BenchmarkMatchRegex(b *testing.B) {
	benchMatch(b, Match{
		Path:        pathMatch(MatchRegularExpression, "/v[0-9]+/items/[a-z0-9-]+"),
		Headers:     []ValueMatch{{Type: MatchRegularExpression, Name: "user-agent", Value: "curl/"}},
		QueryParams: []ValueMatch{{Type: MatchRegularExpression, Name: "id", Value: "^[0-9]+$"}},
	}, request{target: "/v2/items/abc-1?id=123", headers: []string{"User-Agent", "curl/8.0"}})
}
