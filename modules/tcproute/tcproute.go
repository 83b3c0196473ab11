package tcproute

import (
	"context"

	"go.uber.org/zap"

	"github.com/coxswain-labs/coxswain/core"
)

// ModuleID is the route kind this package registers.
const ModuleID core.ModuleID = "route.tcp"

func init() {
	core.RegisterModule((*Route)(nil))
}

// Route is the route.tcp module. Its config is empty: everything a TCPRoute rule says is its
// backends, which the engine compiles into core.Stream.Upstream.
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
	Serve(ctx, r.log, s)
}

// Serve connects s to an upstream and pipes it; a connection whose backend cannot be reached is
// closed (a TCP client sees the connection accepted and then closed: the port itself is served).
// log may be nil.
func Serve(ctx context.Context, log *zap.Logger, s *core.Stream) Stats {
	up, done, err := s.Upstream.Dial(ctx, s.Conn.RemoteAddr())
	if err != nil {
		if log != nil {
			log.Debug("connection rejected", zap.Stringer("client", s.Conn.RemoteAddr()), zap.Error(err))
		}
		_ = s.Conn.Close()
		return Stats{}
	}
	defer done()
	s.UpstreamAddr = up.RemoteAddr().String()
	st := Pipe(s.Conn, up, s.Prefix, s.IdleTimeout)
	s.BytesFromClient, s.BytesToClient = st.Up, st.Down
	if st.Idle && log != nil {
		log.Debug("idle connection closed", zap.Stringer("client", s.Conn.RemoteAddr()),
			zap.Duration("idleTimeout", s.IdleTimeout))
	}
	return st
}
