// Package proxy is the Coxswain data-plane engine: it turns a snapshot (core/ir/v1) into a routing
// table, binds the listener sockets the snapshot names, and serves requests through the table that
// is current when each request starts.
//
// A table is immutable once built. Apply builds the next one beside the serving one, binds any new
// sockets, then swaps an atomic pointer; a socket whose address, port and protocol are unchanged keeps
// its accept loop and connections, and its requests see the new table from their next request on. The
// old table is retired: its in-flight requests finish on it, and when the last one ends the modules it
// loaded are cleaned up.
//
// Per request the engine does no locking, no map allocation and no JSON: a Host lookup in maps keyed
// by exact name and by wildcard suffix, a scan of the virtual host's routes in precedence order, the
// route's filter chain (compiled once per table), a lock-free weighted backend choice, the cluster's
// balancer, and the forwarder.
//
// Listener modules ("listener.http", "listener.https", "listener.tcp", "listener.tls",
// "listener.udp", see package listener) implement StreamListener: they turn a bound socket into
// served connections. The engine owns the socket. Layer-4 routes (l4.go) are compiled by the
// interface their match module implements (core.StreamRoute, core.DatagramRoute), and their
// connections and sessions hold a reference on the table they started with for their whole life.
package proxy
