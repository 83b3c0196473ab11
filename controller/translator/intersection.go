package translator

// GatewayRouteHostnameIntersectionPrecedence (HTTPRouteSpec.hostnames, Extended): when routes on
// one listener yield the same intersected hostname, precedence goes first to the route whose own
// hostname is the more specific — characters in a matching non-wildcard hostname, then characters
// in a matching hostname — and only then to the rule-level criteria. A listener "abc.example.com"
// thus serves a newer route naming "abc.example.com" before an older one naming "*.example.com",
// and the older one still gets what the newer one's rules do not match. A route that names no
// hostname has no matching hostname at all and ranks after every route that names one.

// hostnameOrigin returns the most specific of the route's own hostnames that yields the
// virtual-host name effective on a listener with hostname listener ("" when the route names
// none).
func hostnameOrigin(listener string, route []string, effective string) string {
	best := ""
	for _, r := range route {
		if h, ok := IntersectHostname(listener, r); ok && h == effective {
			if best == "" || compareOrigin(r, best) > 0 {
				best = r
			}
		}
	}
	return best
}

// compareOrigin compares two route hostnames by the spec's specificity: more characters in a
// non-wildcard hostname first, then more characters; "" (no hostname) is least specific.
func compareOrigin(a, b string) int {
	exact := func(h string) int {
		if h == "" || isWildcard(h) {
			return 0
		}
		return len(h)
	}
	if ea, eb := exact(a), exact(b); ea != eb {
		return ea - eb
	}
	return len(a) - len(b)
}
