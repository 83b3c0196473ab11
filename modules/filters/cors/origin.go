package cors

import (
	"fmt"
	"strings"
)

// originPattern is one compiled allowOrigins entry. Matching is case-insensitive (schemes and
// hosts are) and a missing port is the scheme's default, so "https://a.example" and
// "https://A.example:443" are one origin.
type originPattern struct {
	scheme string
	// host is the whole host, or with wildcard the suffix a host must end with (".bar.com"),
	// or "" with wildcard for any host.
	host     string
	wildcard bool
	port     string
}

// compileOrigin parses an allowOrigins entry other than "*".
func compileOrigin(s string) (originPattern, error) {
	scheme, host, port, ok := splitOrigin(s)
	if !ok {
		return originPattern{}, fmt.Errorf("origin %q is not <scheme>://<host>[:<port>]", s)
	}
	p := originPattern{scheme: strings.ToLower(scheme), host: strings.ToLower(host), port: port}
	switch {
	case p.host == "*":
		p.host, p.wildcard = "", true
	case strings.HasPrefix(p.host, "*."):
		p.host, p.wildcard = p.host[1:], true
	case strings.Contains(p.host, "*"):
		return originPattern{}, fmt.Errorf("origin %q: a wildcard may only be the host's first label", s)
	}
	if p.port == "" {
		p.port = defaultPort(p.scheme)
	}
	return p, nil
}

// match reports whether the request origin (scheme, host, port as splitOrigin returns them)
// matches. It does not allocate.
func (p *originPattern) match(scheme, host, port string) bool {
	if !strings.EqualFold(scheme, p.scheme) {
		return false
	}
	if port == "" {
		port = defaultPort(p.scheme)
	}
	if port != p.port {
		return false
	}
	if !p.wildcard {
		return strings.EqualFold(host, p.host)
	}
	// "*" is greedy to the left: at least one label before the suffix.
	return len(host) > len(p.host) && strings.EqualFold(host[len(host)-len(p.host):], p.host)
}

// splitOrigin splits "<scheme>://<host>[:<port>]", an IPv6 host in brackets. ok is false for
// anything else ("null", a path, an empty host, a port that is not a number).
func splitOrigin(s string) (scheme, host, port string, ok bool) {
	scheme, rest, found := strings.Cut(s, "://")
	if !found || scheme == "" || rest == "" || strings.ContainsAny(rest, "/?#@ ") {
		return "", "", "", false
	}
	host = rest
	if i := strings.LastIndexByte(rest, ':'); i >= 0 && !strings.Contains(rest[i:], "]") {
		host, port = rest[:i], rest[i+1:]
		if port == "" || len(port) > 5 || strings.Trim(port, "0123456789") != "" {
			return "", "", "", false
		}
	}
	if host == "" {
		return "", "", "", false
	}
	return scheme, host, port, true
}

func defaultPort(scheme string) string {
	switch strings.ToLower(scheme) {
	case "http":
		return "80"
	case "https":
		return "443"
	}
	return ""
}
