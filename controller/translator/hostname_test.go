package translator

import (
	"slices"
	"testing"
)

func TestIntersectHostname(t *testing.T) {
	cases := []struct {
		name, listener, route, want string
		ok                          bool
	}{
		{"spec: an empty listener hostname matches every route hostname", "", "foo.example.com", "foo.example.com", true},
		{"spec: an empty listener keeps a wildcard route hostname", "", "*.example.com", "*.example.com", true},
		{"spec: equal exact names intersect", "foo.example.com", "foo.example.com", "foo.example.com", true},
		{"spec: different exact names do not", "foo.example.com", "bar.example.com", "", false},
		{"spec: a wildcard listener covers one label", "*.example.com", "foo.example.com", "foo.example.com", true},
		{"spec: a wildcard listener covers several labels", "*.example.com", "a.b.example.com", "a.b.example.com", true},
		{"spec: a wildcard does not cover its own suffix", "*.example.com", "example.com", "", false},
		{"spec: a wildcard route covers an exact listener", "foo.example.com", "*.example.com", "foo.example.com", true},
		{"spec: a wildcard route does not cover the bare suffix", "example.com", "*.example.com", "", false},
		{"spec: two wildcards give the more specific (route)", "*.example.com", "*.foo.example.com", "*.foo.example.com", true},
		{"spec: two wildcards give the more specific (listener)", "*.foo.example.com", "*.example.com", "*.foo.example.com", true},
		{"spec: equal wildcards intersect", "*.example.com", "*.example.com", "*.example.com", true},
		{"spec: unrelated wildcards do not", "*.example.com", "*.example.org", "", false},
		{"labels are whole: *.xample.com does not cover example.com names", "*.xample.com", "a.example.com", "", false},
		{"labels are whole for two wildcards", "*.example.com", "*.xample.com", "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := IntersectHostname(c.listener, c.route)
			if got != c.want || ok != c.ok {
				t.Errorf("IntersectHostname(%q, %q) = %q, %v; want %q, %v", c.listener, c.route, got, ok, c.want, c.ok)
			}
		})
	}
}

func TestEffectiveHostnames(t *testing.T) {
	cases := []struct {
		name     string
		listener string
		route    []string
		want     []string
		ok       bool
	}{
		{"spec: a route without hostnames takes the listener's", "*.example.com", nil, []string{"*.example.com"}, true},
		{"spec: neither has hostnames: the catch-all", "", nil, []string{""}, true},
		{"spec: non-matching route hostnames are ignored", "*.example.com", []string{"a.example.com", "other.org"}, []string{"a.example.com"}, true},
		{"spec: no intersection is NoMatchingListenerHostname", "foo.example.com", []string{"bar.example.com"}, nil, false},
		{"duplicates after intersection collapse", "foo.example.com", []string{"*.example.com", "foo.example.com"}, []string{"foo.example.com"}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := EffectiveHostnames(c.listener, c.route)
			if !slices.Equal(got, c.want) || ok != c.ok {
				t.Errorf("EffectiveHostnames(%q, %q) = %q, %v; want %q, %v", c.listener, c.route, got, ok, c.want, c.ok)
			}
		})
	}
}

func TestHostnameOrder(t *testing.T) {
	got := []string{"", "*.example.com", "a.example.com", "*.foo.example.com", "foo.example.com", "b.example.com"}
	slices.SortFunc(got, compareHostnames)
	// Gateway spec: exact before wildcard before catch-all; more specific wildcards first.
	want := []string{"foo.example.com", "a.example.com", "b.example.com", "*.foo.example.com", "*.example.com", ""}
	if !slices.Equal(got, want) {
		t.Errorf("order %q, want %q", got, want)
	}
}
