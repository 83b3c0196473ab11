// Package tcproute is Gateway API's TCPRoute, proxy half: the "route.tcp" module, a
// core.StreamRoute that connects each downstream connection to one of its route's backends and
// copies bytes both ways (Pipe). translate/ is the controller half ("translate.route.tcp").
//
// A TCPRoute has no matches: a TCP listener (listener.tcp) serves its port with the first route
// of its only virtual host, which the translator orders oldest first, so when several TCPRoutes
// attach to one listener the oldest wins. Backend choice is the engine's (core.Upstream: weights,
// the cluster's balancer, rejection for the share of an unresolved backend); the connect timeout
// is the proxy's UpstreamDialTimeout and the idle timeout its StreamIdleTimeout.
//
// Route, Serve and Pipe are shared with route.tls (modules/tlsroute embeds Route), whose
// passthrough and terminated streams are TCP streams once the listener has dealt with TLS. Between two TCP sockets it moves bytes with
// splice(2) on Linux (zero-copy), propagates half-close, and enforces the idle timeout without
// giving up splice.
package tcproute
