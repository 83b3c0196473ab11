package grpcroute

import (
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"regexp"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/core/httpmatch"
)

func init() {
	core.RegisterModule((*Matcher)(nil))
}

var (
	_ core.HTTPMatcher             = (*Matcher)(nil)
	_ core.HTTPErrorWriter         = (*Matcher)(nil)
	_ core.HTTPProtocolErrorWriter = (*Matcher)(nil)
	_ core.HTTPTrailerErrorWriter  = (*Matcher)(nil)
	_ core.HTTPDeadliner           = (*Matcher)(nil)
	_ core.Provisioner             = (*Matcher)(nil)
	_ core.Validator               = (*Matcher)(nil)
)

// config lets Matcher embed Match (the JSON decodes straight into it) without a field named Match
// clashing with the Match method.
type config = Match

// Matcher is the route.grpc module: one compiled GRPCRouteMatch. Its config is Match; Provision
// compiles it and Match evaluates it per request.
type Matcher struct {
	config

	service, method     string
	serviceRE, methodRE *regexp.Regexp
	// needPath is set when a method condition needs the path split into service and method.
	needPath bool
	headers  []httpmatch.Header
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

// Provision compiles the match. It needs nothing from bc, which is why New can pass nil.
func (m *Matcher) Provision(_ *core.BuildContext) error {
	if err := m.compileMethod(); err != nil {
		return fmt.Errorf("method: %w", err)
	}
	return m.compileHeaders()
}

func (m *Matcher) compileMethod() error {
	mm := m.Method
	if mm == nil || (mm.Service == "" && mm.Method == "") {
		return nil
	}
	m.needPath = true
	switch mm.Type {
	case MatchExact, "":
		if strings.IndexByte(mm.Service, '/') >= 0 || strings.IndexByte(mm.Method, '/') >= 0 {
			return errors.New("an exact service or method must not contain '/'")
		}
		m.service, m.method = mm.Service, mm.Method
	case MatchRegularExpression:
		var err error
		if m.serviceRE, err = anchored(mm.Service); err != nil {
			return fmt.Errorf("service: %w", err)
		}
		if m.methodRE, err = anchored(mm.Method); err != nil {
			return fmt.Errorf("method: %w", err)
		}
	default:
		return fmt.Errorf("unsupported match type %q", mm.Type)
	}
	return nil
}

// anchored compiles an RE2 expression that must match the whole value; "" matches anything, so
// it compiles to nothing.
func anchored(expr string) (*regexp.Regexp, error) {
	if expr == "" {
		return nil, nil
	}
	return httpmatch.Anchored(expr)
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
		var value string
		var re *regexp.Regexp
		switch h.Type {
		case MatchExact, "":
			value = h.Value
		case MatchRegularExpression:
			var err error
			if re, err = regexp.Compile(h.Value); err != nil {
				return fmt.Errorf("headers[%d] (%s): %w", i, h.Name, err)
			}
		default:
			return fmt.Errorf("headers[%d] (%s): unsupported match type %q", i, h.Name, h.Type)
		}
		m.headers = append(m.headers, httpmatch.NewHeader(key, ",", value, re))
	}
	return nil
}

// Validate rejects exact header values no request could carry (control characters), which would
// also be a header-injection hazard wherever they are echoed.
func (m *Matcher) Validate() error {
	for _, h := range m.headers {
		if h.RE == nil && !httpguts.ValidHeaderFieldValue(h.Value) {
			return fmt.Errorf("header %s: invalid value %q", h.Key, h.Value)
		}
	}
	return nil
}

// Match reports whether r is a gRPC request that satisfies every condition. It does not allocate,
// except to join a repeated header for a regular expression.
func (m *Matcher) Match(r *http.Request) bool {
	if !IsGRPC(r) {
		return false
	}
	if m.needPath && !m.matchMethod(r.URL.Path) {
		return false
	}
	for i := range m.headers {
		if !m.headers[i].Match(r) {
			return false
		}
	}
	return true
}

func (m *Matcher) matchMethod(path string) bool {
	service, method, ok := SplitPath(path)
	if !ok {
		return false
	}
	if m.serviceRE != nil || m.methodRE != nil {
		return (m.serviceRE == nil || m.serviceRE.MatchString(service)) &&
			(m.methodRE == nil || m.methodRE.MatchString(method))
	}
	return (m.service == "" || service == m.service) && (m.method == "" || method == m.method)
}

// SplitPath splits a gRPC request path "/<service>/<method>" into its parts; ok is false for a
// path of any other shape (no leading slash, an empty part, more slashes).
func SplitPath(path string) (service, method string, ok bool) {
	if len(path) < 4 || path[0] != '/' {
		return "", "", false
	}
	rest := path[1:]
	i := strings.IndexByte(rest, '/')
	if i <= 0 || i == len(rest)-1 || strings.IndexByte(rest[i+1:], '/') >= 0 {
		return "", "", false
	}
	return rest[:i], rest[i+1:], true
}

// IsGRPC reports whether r is a gRPC request: POST with content-type application/grpc, alone or
// followed by "+<codec>" or ";<params>". gRPC-Web's application/grpc-web is not gRPC on the wire.
func IsGRPC(r *http.Request) bool {
	if r.Method != http.MethodPost {
		return false
	}
	ct := r.Header["Content-Type"]
	if len(ct) != 1 {
		return false
	}
	const prefix = "application/grpc"
	v := ct[0]
	if len(v) < len(prefix) || !strings.EqualFold(v[:len(prefix)], prefix) {
		return false
	}
	return len(v) == len(prefix) || v[len(prefix)] == '+' || v[len(prefix)] == ';'
}

// ClaimsRequest implements core.HTTPProtocolErrorWriter: an unrouted gRPC request is answered
// with a grpc-status (UNIMPLEMENTED), not a plain 404.
func (m *Matcher) ClaimsRequest(r *http.Request) bool { return IsGRPC(r) }
