// Package translate is the controller half of the stamp fixture: the builder must compile it
// into a full build, by the P/translate convention, and leave it out of a proxy-only one.
package translate

import "github.com/coxswain-labs/coxswain/core"

func init() {
	core.RegisterModule((*Translator)(nil))
}

// Translator stands for a filter translator; the builder only checks that it is linked in.
type Translator struct{}

// CoxswainModule identifies the module.
func (*Translator) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: "translate.filter.tiny_stamp", New: func() core.Module { return new(Translator) }}
}
