// Package udproute is Gateway API's UDPRoute, proxy half: the "route.udp" module, a
// core.DatagramRoute. translate/ is the controller half ("translate.route.udp").
//
// A UDP listener (listener.udp) keeps the per-client session table: eviction after the proxy's
// UDPSessionTimeout, the session cap, and the counters. For a client's first datagram it calls
// OpenSession on the route, which picks a backend by weight (core.Upstream), opens a connected
// UDP socket to it (so the backend sees one source port per client and replies come back to
// this session only), and relays the backend's replies to the client from the listener's socket.
//
// A session costs one socket and one goroutine blocked waiting for the socket to become readable;
// on Unix it holds no buffer while it waits (the datagram is read into a pooled buffer only once
// it is there), so the memory a flood of sessions takes is bounded by the session cap times a
// goroutine and a socket, not times the largest datagram.
package udproute
