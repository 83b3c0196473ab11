// Package b registers filter.http.dup, as its sibling does: a distribution with both panics at init.
package b

import "github.com/coxswain-labs/coxswain/core"

func init() {
	core.RegisterModule((*M)(nil))
}

// M is one of two modules claiming filter.http.dup.
type M struct{}

// CoxswainModule identifies the module.
func (*M) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: "filter.http.dup", New: func() core.Module { return new(M) }}
}
