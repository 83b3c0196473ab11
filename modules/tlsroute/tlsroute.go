package tlsroute

import (
	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/modules/tcproute"
)

// ModuleID is the route kind this package registers.
const ModuleID core.ModuleID = "route.tls"

func init() {
	core.RegisterModule((*Route)(nil))
}

// Route is the route.tls module. Its config is empty: a TLSRoute's hostnames are the virtual
// hosts it is placed in, and its rule is its backends. What reaches it is a byte stream the
// listener has already dealt with, so it serves it exactly as route.tcp does: Provision and
// ServeStream are the embedded tcproute.Route's, and only the module ID is this package's.
type Route struct {
	tcproute.Route
}

var (
	_ core.StreamRoute = (*Route)(nil)
	_ core.Provisioner = (*Route)(nil)
)

// CoxswainModule implements core.Module. It shadows the embedded route.tcp's, which would
// otherwise register this type under route.tcp's ID.
func (*Route) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: ModuleID, New: func() core.Module { return new(Route) }}
}
