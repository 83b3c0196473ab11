// Package pathregex is the PathRewriteRegex filter, "filter.ext.gateway.coxswain-labs.dev.PathRewriteRegex":
// it rewrites the request path with a regular expression before the request goes upstream. An
// HTTPRoute rule references a PathRewriteRegex object with an ExtensionRef filter; the object's
// spec is this module's Config.
//
// The pattern runs on the escaped path, the form sent upstream, as Envoy's regex_rewrite does: an
// encoded slash ("%2F") stays distinct from a path separator, so a rewrite cannot turn one into
// the other, and what the pattern sees is exactly what the backend would have received.
package pathregex

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"

	"github.com/coxswain-labs/coxswain/core"
)

func init() {
	core.RegisterModule((*PathRewriteRegex)(nil))
}

var (
	_ core.ExtensionKind     = (*PathRewriteRegex)(nil)
	_ core.HTTPRequestFilter = (*PathRewriteRegex)(nil)
	_ core.Provisioner       = (*PathRewriteRegex)(nil)
	_ core.Validator         = (*PathRewriteRegex)(nil)
	_ core.ConfigChecker     = (*PathRewriteRegex)(nil)
)

// API is the resource behind this module's ExtensionRefs. A reference to a PathRewriteRegex
// that does not exist fails open, as Coxswain's filter kinds do: the rule is served unrewritten
// and the route says why (ResolvedRefs=False, FilterNotFound). An invalid one fails the rule, and
// so does a reference from a GRPCRoute: a gRPC method path is not for rewriting.
var API = core.ExtensionAPI{
	Group:    "gateway.coxswain-labs.dev",
	Kind:     "PathRewriteRegex",
	Version:  "v1alpha1",
	Resource: "pathrewriteregexes",
	FailOpen: true,
}

// PathRewriteRegex is the module.
type PathRewriteRegex struct {
	Config

	re *regexp.Regexp
}

// CoxswainModule implements core.Module.
func (*PathRewriteRegex) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: ModuleID, New: func() core.Module { return new(PathRewriteRegex) }}
}

// ExtensionAPI implements core.ExtensionKind.
func (*PathRewriteRegex) ExtensionAPI() core.ExtensionAPI { return API }

// ExtensionRouteKinds implements core.ExtensionRouteKinds.
func (*PathRewriteRegex) ExtensionRouteKinds() (supported, ignored []string) {
	return []string{"HTTPRoute", "Ingress"}, nil
}

// Provision compiles the pattern, once per snapshot.
func (f *PathRewriteRegex) Provision(_ *core.BuildContext) error {
	re, err := regexp.Compile(f.Pattern)
	if err != nil {
		return fmt.Errorf("pattern %q: %w", f.Pattern, err)
	}
	f.re = re
	return nil
}

// CheckConfig implements core.ConfigChecker: the controller reports a pattern that does not
// compile (or is empty) in the route's status before any proxy loads it.
func (f *PathRewriteRegex) CheckConfig() error {
	if err := f.Validate(); err != nil {
		return err
	}
	if _, err := regexp.Compile(f.Pattern); err != nil {
		return fmt.Errorf("pattern %q: %w", f.Pattern, err)
	}
	return nil
}

// Validate rejects an empty pattern, which would match at every position of every path.
func (f *PathRewriteRegex) Validate() error {
	if f.Pattern == "" {
		return fmt.Errorf("pattern is empty")
	}
	return nil
}

// FilterRequest rewrites r.URL's path in place and proceeds; the query is untouched. A rewrite
// whose result is not a valid escaped path (a substitution that splits a %XX escape) is answered
// with 500 rather than sent on: the Gateway API forbids skipping a filter.
func (f *PathRewriteRegex) FilterRequest(w http.ResponseWriter, r *http.Request) bool {
	path, raw, ok := f.Rewrite(r.URL.Path, r.URL.RawPath)
	if !ok {
		http.Error(w, "path rewrite produced an invalid path", http.StatusInternalServerError)
		return false
	}
	r.URL.Path, r.URL.RawPath = path, raw
	return true
}

// Rewrite returns the rewritten (Path, RawPath) of a URL whose path is (path, rawPath), as
// url.URL keeps them; ok is false when the result is not a valid escaped path. A result that is
// empty or relative gets a leading "/", so "^/strip" on "/strip" gives "/".
func (f *PathRewriteRegex) Rewrite(path, rawPath string) (newPath, newRaw string, ok bool) {
	esc := (&url.URL{Path: path, RawPath: rawPath}).EscapedPath()
	if !f.re.MatchString(esc) {
		// The common case on a shared rule: no allocation, the path as it came.
		return path, rawPath, true
	}
	out := f.re.ReplaceAllString(esc, f.Substitution)
	if out == "" || out[0] != '/' {
		out = "/" + out
	}
	dec, err := url.PathUnescape(out)
	if err != nil {
		return path, rawPath, false
	}
	// RawPath keeps the escaping the rewrite produced ("%2F" stays encoded); url.URL ignores it
	// when it is just the default encoding of Path.
	return dec, out, true
}
