package translator

import (
	"testing"

	"github.com/coxswain-labs/coxswain/modules/translation"
)

func TestHostnameOrigin(t *testing.T) {
	cases := []struct {
		listener, effective, want string
		route                     []string
	}{
		{"abc.example.com", "abc.example.com", "*.example.com", []string{"*.example.com"}},
		{"abc.example.com", "abc.example.com", "abc.example.com", []string{"*.example.com", "abc.example.com"}},
		{"*.example.com", "*.example.com", "*.com", []string{"*.com"}},
		{"*.example.com", "a.example.com", "a.example.com", []string{"*.com", "a.example.com"}},
		{"", "a.example.com", "a.example.com", []string{"a.example.com", "b.example.com"}},
		{"abc.example.com", "abc.example.com", "", nil},
	}
	for _, c := range cases {
		if got := hostnameOrigin(c.listener, c.route, c.effective); got != c.want {
			t.Errorf("hostnameOrigin(%q, %q, %q) = %q, want %q", c.listener, c.route, c.effective, got, c.want)
		}
	}
}

// TestIntersectionPrecedence: the route's own hostname outranks rule precedence and age, the
// three cases of the upstream HTTPRouteMultipleRoutesAttachmentSameHostnameIntersection test.
func TestIntersectionPrecedence(t *testing.T) {
	older := &routeState{key: RouteKey{Kind: "HTTPRoute", Namespace: "ns", Name: "older"}}
	newer := &routeState{key: RouteKey{Kind: "HTTPRoute", Namespace: "ns", Name: "newer"}}
	p := func(r *routeState, origin string, prec ...int) *placed {
		return &placed{route: r, origin: origin, entry: &translation.Entry{Precedence: prec}}
	}
	cases := []struct {
		name          string
		first, second *placed
	}{
		{"exact before wildcard", p(newer, "abc.example.com", 1), p(older, "*.example.com", 1)},
		{"exact before wildcard with a longer path", p(newer, "abc.example.com", 1), p(older, "*.example.com", 9)},
		{"longer wildcard before shorter", p(newer, "*.example.com"), p(older, "*.com", 9)},
		{"any hostname before none", p(newer, "*.com"), p(older, "", 9)},
		{"equal origins fall back to precedence", p(newer, "*.com", 2), p(older, "*.com", 1)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !placedLess(c.first, c.second) || placedLess(c.second, c.first) {
				t.Errorf("want first before second")
			}
		})
	}
}
