package ingress

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/modules/filters/pathnormalize"
	"github.com/coxswain-labs/coxswain/modules/httproute"
)

// ModuleID is the route kind this package registers.
const ModuleID = "route.ingress"

func init() { core.RegisterModule((*Matcher)(nil)) }

var (
	_ core.HTTPMatcher = (*Matcher)(nil)
	_ core.Provisioner = (*Matcher)(nil)
)

// Match is the config of one route.ingress instance: the rule's host and one route.http match
// (path; the translator sets nothing else).
type Match struct {
	// Host is the Ingress rule's host: "" for any, "a.example.com" exactly (case-insensitive), or
	// "*.example.com" for one label before ".example.com".
	Host  string          `json:"host,omitempty"`
	Match httproute.Match `json:"match"`
	// Normalize is a pathnormalize mode ("base", "merge-slashes", "decode-and-merge-slashes"):
	// the path is matched as normalized, as the route's first filter (filter.http.path_normalize
	// in the same mode) hands it on. "" matches the path as it came.
	Normalize string `json:"normalize,omitempty"`
}

// config lets Matcher embed Match without a field clashing with the Match method.
type config = Match

// Matcher is the route.ingress module.
type Matcher struct {
	config

	exact  string // lower-case host, or ""
	suffix string // ".example.com" of a wildcard host, or ""
	inner  *httproute.Matcher
}

// CoxswainModule implements core.Module.
func (*Matcher) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: ModuleID, New: func() core.Module { return new(Matcher) }}
}

// Provision compiles the host and the path match.
func (m *Matcher) Provision(*core.BuildContext) error {
	h := strings.ToLower(m.Host)
	switch {
	case h == "":
	case strings.HasPrefix(h, "*."):
		if strings.Contains(h[2:], "*") || len(h) < 3 {
			return fmt.Errorf("host %q: a wildcard is one leading \"*.\"", m.Host)
		}
		m.suffix = h[1:]
	case strings.Contains(h, "*"):
		return fmt.Errorf("host %q: a wildcard is one leading \"*.\"", m.Host)
	default:
		m.exact = h
	}
	if m.Normalize != "" {
		if err := pathnormalize.CheckMode(m.Normalize); err != nil {
			return err
		}
	}
	inner, err := httproute.New(m.config.Match)
	if err != nil {
		return err
	}
	m.inner = inner
	return nil
}

// Match reports whether r's host and path match. It does not allocate, except to normalize a
// path that changes.
func (m *Matcher) Match(r *http.Request) bool {
	if m.exact != "" || m.suffix != "" {
		if !m.matchHost(requestHost(r.Host)) {
			return false
		}
	}
	if m.Normalize != "" {
		if p, changed := pathnormalize.DecodedPath(m.Normalize, r.URL.EscapedPath()); changed {
			return m.inner.MatchPath(r, p)
		}
	}
	return m.inner.Match(r)
}

func (m *Matcher) matchHost(h string) bool {
	if m.exact != "" {
		return strings.EqualFold(h, m.exact)
	}
	if len(h) <= len(m.suffix) || !strings.EqualFold(h[len(h)-len(m.suffix):], m.suffix) {
		return false
	}
	return !strings.Contains(h[:len(h)-len(m.suffix)], ".")
}

// requestHost is r.Host without a port and a trailing dot.
func requestHost(h string) string {
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.Contains(h[i:], "]") {
		h = h[:i]
	}
	h = strings.TrimPrefix(strings.TrimSuffix(h, "]"), "[")
	return strings.TrimSuffix(h, ".")
}
