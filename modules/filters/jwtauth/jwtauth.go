// Package jwtauth is the JwtAuth filter, "filter.ext.gateway.coxswain-labs.dev.JwtAuth": a
// request must carry a JWT signed by a key of the configured JWKS, from the configured issuer
// (and, when set, for one of the audiences), within its exp/nbf; otherwise it is answered 401
// (gRPC UNAUTHENTICATED) and never reaches the upstream. An HTTPRoute or GRPCRoute rule
// references a JwtAuth object with an ExtensionRef filter.
//
// The keys reach the module in its config: inline in the object, or fetched by the controller
// (jwks.remote; the resolver in package translate puts the document it fetched into the config).
// The proxy parses them once per snapshot and never fetches anything. Keys the controller has not
// fetched yet make the module answer 503 (gRPC UNAVAILABLE): fail closed, but not the rule's 500.
//
// Verified tokens are remembered per module instance (cache) by their SHA-256, until their exp
// or CacheTTL, whichever is first, so a client repeating its token pays one signature
// verification, not one per request.
package jwtauth

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"go.uber.org/zap"

	"github.com/coxswain-labs/coxswain/core"
)

func init() {
	core.RegisterModule((*JwtAuth)(nil))
}

var (
	_ core.ExtensionKind     = (*JwtAuth)(nil)
	_ core.HTTPRequestFilter = (*JwtAuth)(nil)
	_ core.Provisioner       = (*JwtAuth)(nil)
	_ core.ConfigChecker     = (*JwtAuth)(nil)
	_ core.ConfigWarner      = (*JwtAuth)(nil)
)

// API is the resource behind this module's ExtensionRefs. A reference to a JwtAuth that does not
// exist fails open, as Coxswain's filter kinds do (the route says so: ResolvedRefs=False,
// FilterNotFound); an invalid one fails the rule (500), and one whose keys are not known yet
// answers 503.
var API = core.ExtensionAPI{
	Group:    "gateway.coxswain-labs.dev",
	Kind:     "JwtAuth",
	Version:  "v1alpha1",
	Resource: "jwtauths",
	FailOpen: true,
}

// DefaultSource is where the token is looked for when FromHeaders is unset.
var DefaultSource = TokenSource{Name: "Authorization", ValuePrefix: "Bearer "}

// reserved are headers a claim or the payload may not be copied into: the proxy or the
// transport owns them.
var reserved = []string{"Host", "Content-Length", "Transfer-Encoding", "Connection", "Te", "Trailer",
	"Upgrade", "Keep-Alive", "Proxy-Connection", "Content-Type"}

// JwtAuth is the module.
type JwtAuth struct {
	Config

	keys       []key
	algs       []jose.SignatureAlgorithm // the algorithms of keys: the only ones a token may name
	warnings   []string
	unresolved string // why the keys are unknown; non-empty answers 503
	sources    []TokenSource
	strip      []string // canonical names of the headers removed from every request
	payloadHdr string   // canonical ForwardPayloadHeader
	audiences  map[string]bool
	cache      *cache
	now        func() time.Time
}

// CoxswainModule implements core.Module.
func (*JwtAuth) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: ModuleID, New: func() core.Module { return new(JwtAuth) }}
}

// ExtensionAPI implements core.ExtensionKind.
func (*JwtAuth) ExtensionAPI() core.ExtensionAPI { return API }

// ExtensionRouteKinds implements core.ExtensionRouteKinds.
func (*JwtAuth) ExtensionRouteKinds() (supported, ignored []string) {
	return []string{"HTTPRoute", "Ingress", "GRPCRoute"}, nil
}

// Provision checks the config and parses the JWKS, once per snapshot.
func (f *JwtAuth) Provision(bc *core.BuildContext) error {
	if err := f.compile(); err != nil {
		return err
	}
	if f.unresolved != "" {
		bc.Log.Warn("JWKS not resolved: requests are answered 503", zap.String("issuer", f.Issuer), zap.String("reason", f.unresolved))
	}
	for _, w := range f.warnings {
		bc.Log.Warn("JwtAuth accepted with a warning", zap.String("issuer", f.Issuer), zap.String("warning", w))
	}
	return nil
}

// CheckConfig implements core.ConfigChecker: the controller reports an invalid config — and an
// inline JWKS without a usable key — in the route's status before any proxy loads it.
func (f *JwtAuth) CheckConfig() error { return f.compile() }

// ConfigWarnings implements core.ConfigWarner: the JWKS keys left out, and why.
func (f *JwtAuth) ConfigWarnings() []string {
	if f.cache == nil {
		_ = f.compile()
	}
	return f.warnings
}

// compile checks the config and builds what requests use.
func (f *JwtAuth) compile() error {
	if f.Issuer == "" {
		return errors.New("issuer is empty")
	}
	f.sources = slices.Clone(f.FromHeaders)
	if len(f.sources) == 0 {
		f.sources = []TokenSource{DefaultSource}
	}
	sourceNames := map[string]bool{}
	for i, s := range f.sources {
		if !validHeaderName(s.Name) {
			return fmt.Errorf("fromHeaders[%d]: %q is not a header name", i, s.Name)
		}
		f.sources[i].Name = http.CanonicalHeaderKey(s.Name)
		sourceNames[f.sources[i].Name] = true
	}
	f.strip = nil
	add := func(field, name string) error {
		if !validHeaderName(name) {
			return fmt.Errorf("%s: %q is not a header name", field, name)
		}
		c := http.CanonicalHeaderKey(name)
		if sourceNames[c] {
			return fmt.Errorf("%s: %s is where the token is read from", field, c)
		}
		if slices.Contains(reserved, c) {
			return fmt.Errorf("%s: %s cannot be set from a token", field, c)
		}
		if slices.Contains(f.strip, c) {
			return fmt.Errorf("%s: header %s is set twice", field, c)
		}
		f.strip = append(f.strip, c)
		return nil
	}
	for i, ch := range f.ClaimToHeaders {
		if ch.Claim == "" {
			return fmt.Errorf("claimToHeaders[%d]: claim is empty", i)
		}
		if err := add(fmt.Sprintf("claimToHeaders[%d].header", i), ch.Header); err != nil {
			return err
		}
	}
	f.payloadHdr = ""
	if f.ForwardPayloadHeader != "" {
		if err := add("forwardPayloadHeader", f.ForwardPayloadHeader); err != nil {
			return err
		}
		f.payloadHdr = http.CanonicalHeaderKey(f.ForwardPayloadHeader)
	}
	f.audiences = map[string]bool{}
	for _, a := range f.Audiences {
		f.audiences[a] = true
	}
	f.keys, f.algs, f.warnings, f.unresolved = nil, nil, nil, ""
	j := f.JWKS
	switch {
	case j.Remote != nil && j.Inline != "":
		return errors.New("jwks: exactly one of remote and inline must be set")
	case j.Unresolved != "":
		f.unresolved = j.Unresolved
	case j.Inline != "":
		keys, warnings, err := ParseJWKS([]byte(j.Inline))
		if err != nil {
			return fmt.Errorf("jwks: %w", err)
		}
		f.keys, f.warnings = keys, warnings
		for _, k := range keys {
			if !slices.Contains(f.algs, k.alg) {
				f.algs = append(f.algs, k.alg)
			}
		}
	case j.Remote != nil:
		f.unresolved = "jwks.remote " + j.Remote.URI + " was not fetched: this build has no resolver for JwtAuth"
	default:
		return errors.New("jwks: exactly one of remote and inline must be set")
	}
	f.cache = new(cache)
	if f.now == nil {
		f.now = time.Now
	}
	return nil
}

// validHeaderName reports whether s is an HTTP field name (an RFC 9110 token).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// FilterRequest lets a request with a valid token through, with the claim headers set and the
// token removed (unless Forward); anything else is answered here.
func (f *JwtAuth) FilterRequest(w http.ResponseWriter, r *http.Request) bool {
	for _, h := range f.strip {
		delete(r.Header, h)
	}
	if f.unresolved != "" {
		core.Deny(w, r, http.StatusServiceUnavailable, core.GRPCUnavailable, "authentication unavailable: the token issuer's keys are not known yet")
		return false
	}
	tok, from, err := f.token(r)
	if err != nil {
		// RFC 6750 §3.1: a request with no credentials gets the challenge without an error code.
		w.Header()["Www-Authenticate"] = []string{"Bearer"}
		core.Deny(w, r, http.StatusUnauthorized, core.GRPCUnauthenticated, "missing bearer token")
		return false
	}
	v, err := f.verify(tok, f.now())
	if err != nil {
		w.Header()["Www-Authenticate"] = []string{`Bearer error="invalid_token"`}
		core.Deny(w, r, http.StatusUnauthorized, core.GRPCUnauthenticated, "invalid token: "+err.Error())
		return false
	}
	if !f.Forward {
		delete(r.Header, from)
	}
	for _, h := range v.headers {
		r.Header[h.name] = []string{h.value}
	}
	if f.payloadHdr != "" {
		r.Header[f.payloadHdr] = []string{v.payload}
	}
	return true
}

// token finds the token in the first source header present with its prefix; it returns the
// header's canonical name too. A header sent more than once is ambiguous and is not read.
func (f *JwtAuth) token(r *http.Request) (tok, from string, err error) {
	for _, s := range f.sources {
		name := s.Name
		vals := r.Header[name]
		if len(vals) != 1 {
			continue
		}
		v := vals[0]
		if len(v) < len(s.ValuePrefix) || !strings.EqualFold(v[:len(s.ValuePrefix)], s.ValuePrefix) {
			continue
		}
		if tok = strings.TrimSpace(v[len(s.ValuePrefix):]); tok != "" {
			return tok, name, nil
		}
	}
	return "", "", errNoToken
}
