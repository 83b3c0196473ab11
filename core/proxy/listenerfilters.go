package proxy

import (
	"context"
	"fmt"
	"net/http"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// Listener filters (Gateway API listeners[].filters.requests, GEP-5224) are ordinary filter
// modules, loaded like a route's, whose chain runs after the Server (the Gateway listener) is
// chosen and before the virtual host and route lookup. So a request no route matches still
// passes them (and gets its 404 only then), and a filter that answers — a deny, a rate limit —
// ends the request before routing. Their order is the list's, as the GEP requires.
//
// Listener selection is not redone after them, and a filter cannot change it: the GEP forbids a
// listener filter to modify Host or :authority, so the Host the client sent is put back before
// the lookup (the mutation is ignored, the SHOULD of the spec). Response filters have no place
// here (there is no upstream response yet), so a module that is only one is refused.

// listenerFilters compiles s's listener filters into srv.
func (b *builder) listenerFilters(ls *ListenerState, srv *server, s *irv1.Server) error {
	if len(s.GetFilters()) == 0 {
		return nil
	}
	fs, err := b.filters(s.GetFilters())
	if err != nil {
		return fmt.Errorf("listener %w", err)
	}
	for i, f := range fs {
		if f.req == nil && f.mw == nil {
			return fmt.Errorf("listener filter %d: module %s only filters responses; a listener filter runs before routing", i, f.id)
		}
	}
	srv.listenerFilters = &hostGuard{next: chain(fs, &routeStage{ls: ls, srv: srv})}
	return nil
}

// hostGuard remembers the request's Host for routeStage to restore. It costs a context and a
// request copy per request, only on a Server that has listener filters.
type hostGuard struct{ next http.Handler }

type originalHostKey struct{}

func (g *hostGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), originalHostKey{}, r.Host)))
}

// routeStage ends a listener filter chain: Host restored, then the route lookup of the Server.
type routeStage struct {
	ls  *ListenerState
	srv *server
}

func (s *routeStage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h, ok := r.Context().Value(originalHostKey{}).(string); ok {
		r.Host = h
	}
	r.Header.Del("Host") // a filter's "Host" header would otherwise reach the upstream
	s.ls.serveRoute(s.srv, w, r)
}
