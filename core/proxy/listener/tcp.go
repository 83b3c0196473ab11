package listener

import (
	"context"
	"errors"
	"net"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
)

// TCPModuleID is the raw TCP listener.
const TCPModuleID core.ModuleID = "listener.tcp"

func init() {
	core.RegisterModule(&TCP{})
}

// TCP serves a port with a stream route (route.tcp): every connection goes to the first route of
// the listener's only server, which is the oldest TCPRoute attached. Its config is empty.
type TCP struct{}

var (
	_ proxy.StreamListener = (*TCP)(nil)
	_ proxy.RouteAPIer     = (*TCP)(nil)
)

// CoxswainModule implements core.Module.
func (*TCP) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: TCPModuleID, New: func() core.Module { return new(TCP) }}
}

// RouteAPI implements proxy.RouteAPIer.
func (*TCP) RouteAPI() proxy.RouteAPI { return proxy.RouteAPIStream }

// Check implements proxy.StreamListener: one cleartext server, which a port-keyed protocol
// cannot tell apart from another.
func (*TCP) Check(l *irv1.Listener) error {
	return checkPortKeyed(l)
}

func checkPortKeyed(l *irv1.Listener) error {
	switch {
	case len(l.GetServers()) != 1:
		return errors.New("a port-keyed listener has exactly one server")
	case l.GetServers()[0].GetHostname() != "":
		return errors.New("a port-keyed listener's server has no hostname")
	case l.GetServers()[0].GetTls() != nil:
		return errors.New("a port-keyed listener has no TLS settings")
	}
	return nil
}

// NewServer implements proxy.StreamListener.
func (*TCP) NewServer(sc proxy.ServeContext) proxy.ConnServer {
	idle := proxy.Positive(sc.Limits.StreamIdleTimeout)
	var s *streamServer
	s = newStreamServer(sc, func(ctx context.Context, c net.Conn, ls *proxy.ListenerState) {
		t, ok := ls.StreamRoute("")
		if !ok {
			s.drop(c, "no route", nil)
			return
		}
		t.Serve(ctx, &core.Stream{Conn: c, Upstream: t.Upstream, IdleTimeout: idle})
	})
	return s
}
