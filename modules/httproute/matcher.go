package httproute

import (
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"net/url"
	"regexp"

	"golang.org/x/net/http/httpguts"

	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/core/httpmatch"
	"github.com/coxswain-labs/coxswain/modules/filters/pathmod"
)

func init() {
	core.RegisterModule((*Matcher)(nil))
}

var (
	_ core.HTTPMatcher = (*Matcher)(nil)
	_ core.Provisioner = (*Matcher)(nil)
	_ core.Validator   = (*Matcher)(nil)
)

// config lets Matcher embed Match (so the JSON decodes straight into it) without a field named
// Match clashing with the Match method.
type config = Match

// Matcher is the route.http module: one compiled HTTPRouteMatch. Its config is Match; Provision
// compiles it and Match evaluates it per request.
type Matcher struct {
	config

	method  string
	path    pathCond
	headers []httpmatch.Header
	query   []queryCond
}

// New compiles m into a ready Matcher, running the same Provision and Validate that core.Load
// would. It is for code that builds matchers from typed values (tests, benchmarks).
func New(m Match) (*Matcher, error) {
	mm := &Matcher{config: m}
	if err := mm.Provision(nil); err != nil {
		return nil, err
	}
	if err := mm.Validate(); err != nil {
		return nil, err
	}
	return mm, nil
}

// CoxswainModule implements core.Module.
func (*Matcher) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: ModuleID, New: func() core.Module { return new(Matcher) }}
}

type pathKind uint8

const (
	pathAny pathKind = iota
	pathExact
	pathPrefix
	pathRegex
)

type pathCond struct {
	kind pathKind
	// value is the decoded Exact path, or the decoded PathPrefix trimmed by pathmod.TrimPrefix.
	value string
	re    *regexp.Regexp
}

type queryCond struct {
	name  string
	value string
	re    *regexp.Regexp
}

// Provision compiles the match. The bc argument is unused: a matcher needs nothing from its
// surroundings, which is also why New can pass nil.
func (m *Matcher) Provision(_ *core.BuildContext) error {
	m.method = m.Method
	if err := m.compilePath(); err != nil {
		return fmt.Errorf("path: %w", err)
	}
	if err := m.compileHeaders(); err != nil {
		return err
	}
	return m.compileQuery()
}

func (m *Matcher) compilePath() error {
	if m.Path == nil {
		return nil
	}
	switch m.Path.Type {
	case MatchExact:
		v, err := decodePathValue(m.Path.Value)
		if err != nil {
			return err
		}
		m.path = pathCond{kind: pathExact, value: v}
	case MatchPathPrefix, "":
		v, err := decodePathValue(m.Path.Value)
		if err != nil {
			return err
		}
		m.path = pathCond{kind: pathPrefix, value: pathmod.TrimPrefix(v)}
		if m.path.value == "" {
			// "/" matches every path: nothing to check per request.
			m.path.kind = pathAny
		}
	case MatchRegularExpression:
		re, err := httpmatch.Anchored(m.Path.Value)
		if err != nil {
			return err
		}
		m.path = pathCond{kind: pathRegex, re: re}
	default:
		return fmt.Errorf("unsupported match type %q", m.Path.Type)
	}
	return nil
}

// decodePathValue turns an Exact or PathPrefix value into the decoded form r.URL.Path has. An
// empty value is the API default, "/".
func decodePathValue(v string) (string, error) {
	if v == "" {
		return "/", nil
	}
	if v[0] != '/' {
		return "", fmt.Errorf("value %q does not start with '/'", v)
	}
	return url.PathUnescape(v)
}

func (m *Matcher) compileHeaders() error {
	seen := make(map[string]bool, len(m.Headers))
	for i, h := range m.Headers {
		if !httpguts.ValidHeaderFieldName(h.Name) {
			return fmt.Errorf("headers[%d]: invalid header name %q", i, h.Name)
		}
		key := textproto.CanonicalMIMEHeaderKey(h.Name)
		if seen[key] {
			continue // Only the first condition on an equivalent name counts.
		}
		seen[key] = true
		sep := ","
		if key == "Cookie" {
			sep = "; "
		}
		value, re, err := compileValue(h)
		if err != nil {
			return fmt.Errorf("headers[%d] (%s): %w", i, h.Name, err)
		}
		m.headers = append(m.headers, httpmatch.NewHeader(key, sep, value, re))
	}
	return nil
}

func (m *Matcher) compileQuery() error {
	seen := make(map[string]bool, len(m.QueryParams))
	for i, q := range m.QueryParams {
		if q.Name == "" {
			return fmt.Errorf("queryParams[%d]: empty name", i)
		}
		if seen[q.Name] {
			continue
		}
		seen[q.Name] = true
		c := queryCond{name: q.Name}
		var err error
		if c.value, c.re, err = compileValue(q); err != nil {
			return fmt.Errorf("queryParams[%d] (%s): %w", i, q.Name, err)
		}
		m.query = append(m.query, c)
	}
	return nil
}

// compileValue returns the exact value or the unanchored regular expression of a header or query
// condition. An empty type is the API default, Exact.
func compileValue(v ValueMatch) (string, *regexp.Regexp, error) {
	switch v.Type {
	case MatchExact, "":
		return v.Value, nil, nil
	case MatchRegularExpression:
		re, err := regexp.Compile(v.Value)
		return "", re, err
	default:
		return "", nil, fmt.Errorf("unsupported match type %q", v.Type)
	}
}

// Validate checks what Provision does not need to compile but a request could never satisfy, or
// that would be a header-injection hazard if echoed: a method that is not a token, an exact
// header value with control characters.
func (m *Matcher) Validate() error {
	if m.method != "" && !validToken(m.method) {
		return fmt.Errorf("invalid method %q", m.method)
	}
	for _, h := range m.headers {
		if h.RE == nil && !httpguts.ValidHeaderFieldValue(h.Value) {
			return fmt.Errorf("header %s: invalid value %q", h.Key, h.Value)
		}
	}
	if m.path.kind == pathRegex && m.path.re == nil {
		return errors.New("path: regular expression not compiled")
	}
	return nil
}

func validToken(s string) bool {
	for i := 0; i < len(s); i++ {
		if !httpguts.IsTokenRune(rune(s[i])) {
			return false
		}
	}
	return s != ""
}

// Match reports whether r satisfies every condition. It does not allocate, except to join a
// repeated header for a regular expression, or to unescape a query value for one.
func (m *Matcher) Match(r *http.Request) bool { return m.MatchPath(r, r.URL.Path) }

// MatchPath is Match with path in place of r.URL.Path: for a route kind that matches the path
// as a filter of its own will rewrite it before anything else sees it (route.ingress with the
// path-normalize annotation).
func (m *Matcher) MatchPath(r *http.Request, path string) bool {
	if m.method != "" && r.Method != m.method {
		return false
	}
	if !m.path.match(path) {
		return false
	}
	for i := range m.headers {
		if !m.headers[i].Match(r) {
			return false
		}
	}
	for i := range m.query {
		if !m.query[i].match(r.URL.RawQuery) {
			return false
		}
	}
	return true
}

func (c *pathCond) match(p string) bool {
	if p == "" {
		// An absolute-form request target without a path ("http://h") asks for "/".
		p = "/"
	}
	switch c.kind {
	case pathExact:
		return p == c.value
	case pathPrefix:
		return pathmod.HasPrefix(p, c.value)
	case pathRegex:
		return c.re.MatchString(p)
	}
	return true
}
