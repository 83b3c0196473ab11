// Package rewrite is Gateway API's URLRewrite filter, "filter.http.url_rewrite": it changes the
// Host and/or path of the request before it goes upstream.
package rewrite

import (
	"fmt"
	"net/http"

	"golang.org/x/net/http/httpguts"

	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/modules/filters/pathmod"
)

func init() {
	core.RegisterModule((*Rewrite)(nil))
}

var (
	_ core.HTTPRequestFilter = (*Rewrite)(nil)
	_ core.Provisioner       = (*Rewrite)(nil)
	_ core.Validator         = (*Rewrite)(nil)
)

// Rewrite is the filter.http.url_rewrite module.
type Rewrite struct {
	Config

	path *pathmod.Rewriter
}

// CoxswainModule implements core.Module.
func (*Rewrite) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: ModuleID, New: func() core.Module { return new(Rewrite) }}
}

// Provision compiles the path modifier.
func (f *Rewrite) Provision(_ *core.BuildContext) error {
	if f.Path != nil {
		rw, err := pathmod.Compile(*f.Path)
		if err != nil {
			return fmt.Errorf("path: %w", err)
		}
		f.path = rw
	}
	return nil
}

// Validate checks the hostname is something a Host header can carry.
func (f *Rewrite) Validate() error {
	if f.Hostname != "" && !httpguts.ValidHostHeader(f.Hostname) {
		return fmt.Errorf("invalid hostname %q", f.Hostname)
	}
	return nil
}

// FilterRequest rewrites r in place and proceeds. The path rewrite keeps r.URL.Path (decoded,
// what later routes and filters see) and r.URL.RawPath (escaped, what goes on the wire)
// describing the same path; the query is untouched.
func (f *Rewrite) FilterRequest(_ http.ResponseWriter, r *http.Request) bool {
	if f.Hostname != "" {
		r.Host = f.Hostname
	}
	if f.path != nil {
		r.URL.Path, r.URL.RawPath = f.path.Apply(r.URL.Path, r.URL.RawPath)
	}
	return true
}
