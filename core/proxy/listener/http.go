package listener

import (
	"errors"
	"net/http"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
)

// HTTPModuleID is the cleartext HTTP listener.
const HTTPModuleID core.ModuleID = "listener.http"

func init() {
	core.RegisterModule(&HTTP{})
}

// HTTP serves HTTP/1.1 (keep-alive) and cleartext HTTP/2 with prior knowledge on one socket. Its
// config is empty.
type HTTP struct{}

var (
	_ core.Module          = (*HTTP)(nil)
	_ proxy.StreamListener = (*HTTP)(nil)
)

// CoxswainModule implements core.Module.
func (*HTTP) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: HTTPModuleID, New: func() core.Module { return new(HTTP) }}
}

// Check implements proxy.StreamListener: a cleartext listener carries no TLS settings.
func (*HTTP) Check(l *irv1.Listener) error {
	for _, s := range l.GetServers() {
		if s.GetTls() != nil {
			return errors.New("server " + quote(s.GetHostname()) + " has TLS settings on a cleartext listener")
		}
	}
	return nil
}

// NewServer implements proxy.StreamListener.
func (*HTTP) NewServer(sc proxy.ServeContext) proxy.ConnServer {
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	// HTTP/1.1 goes through the engine's own server (lean per request, small per idle connection);
	// connections that open with the HTTP/2 preface go to the engine's own HTTP/2 server, or to
	// net/http's with --proxy-http2-server=stdlib (Limits.HTTP2Server).
	return proxy.NewHTTP1Server(sc, newHTTPServer(sc, p, nil))
}

func quote(h string) string {
	if h == "" {
		return `""`
	}
	return `"` + h + `"`
}
