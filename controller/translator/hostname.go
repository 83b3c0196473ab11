package translator

import (
	"slices"
	"strings"
)

// Hostname rules (Gateway API Listener.hostname and HTTPRoute.hostnames): a leading "*." label
// matches one or more labels ("*.example.com" matches "a.example.com" and "a.b.example.com",
// not "example.com"); an empty hostname matches everything.

func isWildcard(h string) bool { return strings.HasPrefix(h, "*.") }

// wildcardMatches reports whether wildcard w matches the exact name h.
func wildcardMatches(w, h string) bool {
	suffix := w[1:] // ".example.com"
	return len(h) > len(suffix) && strings.HasSuffix(h, suffix)
}

// IntersectHostname returns the hostname a listener hostname and a route hostname both accept,
// and whether there is one. An empty listener hostname accepts any route hostname. With two
// wildcards the more specific one is the intersection; a wildcard and a name it covers give
// the name.
func IntersectHostname(listener, route string) (string, bool) {
	switch {
	case listener == "":
		return route, true
	case route == "" || listener == route:
		return listener, true
	case isWildcard(listener) && isWildcard(route):
		if strings.HasSuffix(route[1:], listener[1:]) {
			return route, true
		}
		if strings.HasSuffix(listener[1:], route[1:]) {
			return listener, true
		}
		return "", false
	case isWildcard(listener) && wildcardMatches(listener, route):
		return route, true
	case isWildcard(route) && wildcardMatches(route, listener):
		return listener, true
	}
	return "", false
}

// EffectiveHostnames returns the virtual-host names a route gets on a listener: the listener's
// hostname when the route names none, else every intersection, deduplicated in route order.
// ok is false when the route names hostnames and none intersects (NoMatchingListenerHostname).
func EffectiveHostnames(listener string, route []string) ([]string, bool) {
	if len(route) == 0 {
		return []string{listener}, true
	}
	var out []string
	for _, r := range route {
		if h, ok := IntersectHostname(listener, r); ok && !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	return out, len(out) > 0
}

// hostnameLess orders hostnames by specificity, as ir.proto asks for servers and virtual hosts:
// exact names (longest first), then wildcards (longest first), then the catch-all "" last;
// alphabetical among equals so the order is total.
func hostnameLess(a, b string) bool {
	ra, rb := hostnameRank(a), hostnameRank(b)
	if ra != rb {
		return ra < rb
	}
	if len(a) != len(b) {
		return len(a) > len(b)
	}
	return a < b
}

func hostnameRank(h string) int {
	switch {
	case h == "":
		return 2
	case isWildcard(h):
		return 1
	}
	return 0
}
