// Package tlsroute is Gateway API's TLSRoute, proxy half: the "route.tls" module, a
// core.StreamRoute. translate/ is the controller half ("translate.route.tls").
//
// Everything TLS-specific happens before the route: the TLS listener (listener.tls) reads the
// ClientHello, selects the Gateway listener's server and the route by SNI (exact, then wildcard,
// then catch-all; hostnames are the route's hostnames intersected with the listener's), and
// either passes the encrypted stream through (Passthrough) or terminates it with the server's
// certificate (Terminate). What reaches route.tls is a byte stream, which it connects to a
// backend chosen by weight and pipes with route.tcp's own code (Route embeds tcproute.Route:
// tcproute.Pipe, splice for passthrough, half-close, idle timeout).
package tlsroute
