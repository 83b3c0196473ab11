package tlsroute

import (
	"context"

	"go.uber.org/zap"

	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/modules/tcproute"
)

// ModuleID is the route kind this package registers.
const ModuleID core.ModuleID = "route.tls"

func init() {
	core.RegisterModule((*Route)(nil))
}

// Route is the route.tls module. Its config is empty: a TLSRoute's hostnames are the virtual
// hosts it is placed in, and its rule is its backends.
type Route struct {
	log *zap.Logger
}

var (
	_ core.StreamRoute = (*Route)(nil)
	_ core.Provisioner = (*Route)(nil)
)

// CoxswainModule implements core.Module.
func (*Route) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: ModuleID, New: func() core.Module { return new(Route) }}
}

// Provision implements core.Provisioner.
func (r *Route) Provision(bc *core.BuildContext) error {
	r.log = bc.Log
	return nil
}

// ServeStream implements core.StreamRoute.
func (r *Route) ServeStream(ctx context.Context, s *core.Stream) {
	tcproute.Serve(ctx, r.log, s)
}
