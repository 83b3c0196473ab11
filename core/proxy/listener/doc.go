// Package listener holds the HTTP-family listener modules: "listener.http" (HTTP/1.1 with
// keep-alive, and cleartext HTTP/2 with prior knowledge) and "listener.https" (TLS termination with
// SNI-selected certificates, ALPN h2 and http/1.1).
//
// A module in the "listener.*" namespace implements proxy.StreamListener. The engine owns the socket
// and picks the module by the IR Listener's protocol, lower-cased; the module checks the IR listener
// at every table build and builds the long-lived server for a socket, which reads the socket's
// current table per request and its current certificates per handshake.
package listener
