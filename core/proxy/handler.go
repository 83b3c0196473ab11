package proxy

import (
	"net/http"

	"github.com/coxswain-labs/coxswain/core"
)

// serveHTTP routes r: Server by Host (exact, most specific wildcard, catch-all; never falling back
// to a less specific Server, which would break Gateway listener isolation), then the virtual hosts of
// that Server from the most specific hostname to the least, each route in precedence order. Gateway
// API ranks rules by hostname specificity before anything else, so trying the next virtual host when
// no route of a more specific one matches is exactly that precedence.
func (ls *ListenerState) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if a := ls.table.acme; a != nil && r.TLS == nil && a.serveHTTP01(w, r) {
		return // an ACME HTTP-01 validation, before any Server, filter or route
	}
	if r.TLS != nil && ls.misdirected(r) {
		ls.table.noRouteWriter(r).WriteError(w, r, http.StatusMisdirectedRequest,
			"this connection's TLS server name belongs to another listener than the request's host")
		return
	}
	srv, ok := ls.servers.lookup(normalizeHost(r.Host))
	if !ok {
		ls.table.noRouteWriter(r).WriteError(w, r, http.StatusNotFound, "no route for this request")
		return
	}
	// The client certificate check belongs to the connection, so it comes before the listener
	// filters: a request the Server's CA would refuse is never seen by them.
	if !ls.admitted(srv, r) {
		ls.table.noRouteWriter(r).WriteError(w, r, http.StatusMisdirectedRequest,
			"this connection was not set up with the client certificate check the request's host requires")
		return
	}
	if srv.listenerFilters != nil {
		srv.listenerFilters.ServeHTTP(w, r) // ends in srv.routeStage (listenerfilters.go)
		return
	}
	ls.serveRoute(srv, w, r)
}

// serveRoute serves r on the routes of srv, the Server its Host selected.
func (ls *ListenerState) serveRoute(srv *server, w http.ResponseWriter, r *http.Request) {
	rt := srv.route(r)
	if rt == nil {
		ls.table.noRouteWriter(r).WriteError(w, r, http.StatusNotFound, "no route for this request")
		return
	}
	rt.ServeHTTP(w, r)
}

// misdirected reports whether a TLS request's Host selects another Server (Gateway listener) than
// its connection's TLS server name does. The connection was set up, and its certificate chosen, for
// the SNI's listener; a client reusing it for a host of another listener (HTTP/2 connection reuse
// across names that share an address or a certificate) gets 421 and retries on a new connection
// (RFC 9110, section 15.5.20). Without a server name, or with one no Server matches (the handshake
// then fell back to the first certificate), the connection belongs to no listener in particular
// and nothing is misdirected.
func (ls *ListenerState) misdirected(r *http.Request) bool {
	sni := r.TLS.ServerName
	if sni == "" {
		return false
	}
	bySNI, ok := ls.servers.lookup(normalizeHost(sni))
	if !ok {
		return false
	}
	byHost, ok := ls.servers.lookup(normalizeHost(r.Host))
	return ok && byHost != bySNI
}

// noRouteWriter is the error writer for an unrouted request: the first route module of the
// table that claims it as its protocol (a gRPC request gets a grpc-status), else plain text.
func (t *table) noRouteWriter(r *http.Request) core.HTTPErrorWriter {
	for _, pw := range t.noRoute {
		if pw.ClaimsRequest(r) {
			return pw
		}
	}
	return plainErrors{}
}

// addNoRoute records the first loaded instance of a route module that writes its protocol's
// errors; any instance will do, since claiming a request does not depend on a route's match.
func (t *table) addNoRoute(id string, pw core.HTTPProtocolErrorWriter) {
	if t.noRouteIDs[id] {
		return
	}
	if t.noRouteIDs == nil {
		t.noRouteIDs = map[string]bool{}
	}
	t.noRouteIDs[id] = true
	t.noRoute = append(t.noRoute, pw)
}

// route finds the route for r; it does not allocate when the Host is lower case and the matchers
// do not. admitted is false when the Server's client certificate check refuses the request.
func (ls *ListenerState) route(r *http.Request) (_ *route, admitted bool) {
	srv, ok := ls.servers.lookup(normalizeHost(r.Host))
	if !ok {
		return nil, true
	}
	if !ls.admitted(srv, r) {
		return nil, false
	}
	return srv.route(r), true
}

// admitted reports whether srv's client certificate check (if any) lets r through.
func (ls *ListenerState) admitted(srv *server, r *http.Request) bool {
	return srv.cv == nil || (r.TLS != nil && ls.admitClient(srv, r))
}

// route finds the route for r among the virtual hosts of srv.
func (srv *server) route(r *http.Request) *route {
	host := normalizeHost(r.Host)
	for vh, pos, ok := srv.vhosts.next(host, 0); ok; vh, pos, ok = srv.vhosts.next(host, pos) {
		for _, rt := range vh.routes {
			if rt.matcher.Match(r) {
				return rt
			}
		}
	}
	return nil
}
