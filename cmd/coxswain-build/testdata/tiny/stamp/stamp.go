// Package stamp is a tiny filter module for the builder's tests: "filter.http.tiny_stamp" sets
// a request header.
package stamp

import (
	"net/http"

	"github.com/coxswain-labs/coxswain/core"
)

func init() {
	core.RegisterModule((*Stamp)(nil))
}

var _ core.HTTPRequestFilter = (*Stamp)(nil)

// Stamp is the filter.http.tiny_stamp module.
type Stamp struct {
	Value string `json:"value"`
}

// CoxswainModule identifies the module.
func (*Stamp) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: "filter.http.tiny_stamp", New: func() core.Module { return new(Stamp) }}
}

// FilterRequest sets X-Tiny-Stamp.
func (s *Stamp) FilterRequest(_ http.ResponseWriter, r *http.Request) bool {
	r.Header.Set("X-Tiny-Stamp", s.Value)
	return true
}
