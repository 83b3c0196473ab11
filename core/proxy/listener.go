package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"

	"go.uber.org/zap"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// StreamListener is implemented by "listener.*" modules that serve a TCP socket ("listener.http",
// "listener.https"). The engine selects the module by the IR Listener's protocol, lower-cased, and
// loads one instance per IR listener per table build.
//
// The engine owns the socket: it binds it, keeps it across tables while the module ID is unchanged,
// and hands its accepted connections to the ConnServer that NewServer returned when the socket started
// serving this protocol. That server outlives the table whose module instance made it, so it must
// read everything per-table through ServeContext (State, HTTP), never from the instance.
type StreamListener interface {
	core.Module
	// Check validates an IR listener of this protocol (TLS settings present or absent); called at
	// every table build, so a bad listener rejects the snapshot before anything is bound.
	Check(l *irv1.Listener) error
	// NewServer returns the server for a socket that starts serving this protocol.
	NewServer(sc ServeContext) ConnServer
}

// ConnServer serves the connections of one socket.
type ConnServer interface {
	// Serve accepts connections from l until l is closed or the server is shut down.
	Serve(l net.Listener) error
	// Shutdown stops accepting and waits for active connections to finish, until ctx is done.
	Shutdown(ctx context.Context) error
	// Close closes every connection now.
	Close() error
}

// ServeContext is what a listener module's server gets from the engine.
type ServeContext struct {
	// Log is named after the listener.
	Log *zap.Logger
	// Name is the IR listener name.
	Name   string
	Limits Limits
	// HTTP routes each request through the socket's current table.
	HTTP http.Handler
	// State returns the socket's current compiled listener: its servers and their certificates.
	State func() *ListenerState
	// ConnContext must be installed as the http.Server's ConnContext: it lets balancers see the
	// downstream address (core.PickInfo.Client) without parsing RemoteAddr per request.
	ConnContext func(ctx context.Context, c net.Conn) context.Context
	// Acquire returns the socket's current state holding a reference on its table, or nil when the
	// socket is shutting down; call Release on it when the connection (or UDP session) it serves
	// ends. Layer-4 listeners use it, so that a table's modules are not cleaned up under a stream.
	Acquire func() *ListenerState
	// Packet is the socket of a PacketListener; nil for stream sockets.
	Packet *net.UDPConn
}

// ListenerState is one IR listener compiled for one table: its servers indexed by hostname (for
// the Host header and TLS SNI) and their certificates.
type ListenerState struct {
	Name     string
	Protocol string

	table    *table
	servers  hostIndex[*server]
	certs    hostIndex[*serverCerts]
	firstTLS *serverCerts // answers SNI that selects no server, when there is no catch-all

	// proxyProtocol is set when every connection must begin with a PROXY protocol header; it is
	// read at accept, under the table current then.
	proxyProtocol *proxyProtocol
	// xffHops is how many X-Forwarded-For entries from the right are trusted proxies' (0: none):
	// fixed per connection when it starts (core.ContextWithClientIPDetection).
	xffHops uint32
	// obs says how its HTTP requests are observed (observe.go); nil: not at all.
	obs *listenerObs
	// altSvc is the Alt-Svc header value of an HTTPS listener that also serves HTTP/3, nil for
	// none; allow0RTT whether that HTTP/3 socket takes early data (http3.go).
	altSvc    []string
	allow0RTT bool
}

// serverCerts are the certificates of one Server, in the order the Gateway listed them.
type serverCerts struct {
	hostname string
	certs    []*tls.Certificate
	cv       *clientValidation // the same as its server's
}

// ErrNoCertificate is returned by Certificate when the listener has no TLS server at all.
var ErrNoCertificate = errors.New("no certificate configured for this listener")

// Certificate chooses the certificate for a TLS ClientHello: the Server whose hostname matches the
// SNI (exact, then the most specific wildcard, then the catch-all); with no SNI or no match, the
// catch-all Server, else the first Server. Among a Server's certificates it takes the first the client
// supports (an ECDSA and an RSA chain may sit side by side).
func (ls *ListenerState) Certificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	sc := ls.handshakeServer(hello.ServerName)
	if sc == nil {
		return nil, ErrNoCertificate
	}
	return pickCertificate(hello, sc.certs)
}
