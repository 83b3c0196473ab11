// Package listener holds the stock listener modules:
//
//   - "listener.http" (HTTP/1.1 with keep-alive, and cleartext HTTP/2 with prior knowledge) and
//     "listener.https" (TLS termination with SNI-selected certificates, ALPN h2 and http/1.1),
//     whose routes are core.HTTPMatchers, and "listener.http3", which the engine loads for an HTTPS
//     listener that also serves HTTP/3 (quic-go) on a UDP socket of the same port;
//   - "listener.tcp" (one stream route per port), "listener.tls" (ClientHello peek, then TLS
//     passthrough or termination by SNI, both on one port if need be) and "listener.udp" (per-client
//     sessions), whose routes are core.StreamRoutes or core.DatagramRoutes (proxy.RouteAPIer).
//
// A module in the "listener.*" namespace implements proxy.StreamListener (listener.udp is a
// proxy.PacketListener, for which the engine binds a UDP socket). The engine owns the socket and
// picks the module by the IR Listener's protocol, lower-cased; the module checks the IR listener
// at every table build and builds the long-lived server for a socket, which reads the socket's
// current table per request (HTTP) or per connection or session (layer 4), and its current
// certificates per handshake.
package listener
