package proxy

import "time"

// Limits are the production limits of the listeners and the upstream transport. A zero field takes
// its default (see DefaultLimits); a negative duration means "no limit".
type Limits struct {
	// ReadHeaderTimeout bounds reading a request's header (slowloris protection). Default 10s.
	ReadHeaderTimeout time.Duration
	// IdleTimeout closes a keep-alive connection idle this long. Default 120s.
	IdleTimeout time.Duration
	// WriteTimeout bounds writing a response. Default none: responses may stream for as long as the
	// route's timeouts allow.
	WriteTimeout time.Duration
	// RequestBodyTimeout bounds each wait for more of an HTTP/1.1 request body: a client that sends
	// nothing for this long in the middle of a body is cut off (408 when nothing was forwarded yet).
	// Default 60s, as nginx's client_body_timeout.
	RequestBodyTimeout time.Duration
	// MaxHeaderBytes caps the request header size. Default 64 KiB.
	MaxHeaderBytes int
	// MaxHeaderFields caps the fields of an HTTP/1.1 request header (431 beyond it): a flood of
	// tiny fields under MaxHeaderBytes still costs a field each to index and forward, and many
	// servers behind refuse a few hundred. Default 200 (Envoy's max_headers_count is 100).
	MaxHeaderFields int
	// MaxConcurrentStreams caps the streams of one HTTP/2 connection. Default 250.
	MaxConcurrentStreams int
	// HTTP2Server selects the inbound HTTP/2 server: HTTP2Own (the engine's own, on x/net's
	// framer) or HTTP2Stdlib (net/http's). Default HTTP2Stdlib.
	HTTP2Server string
	// TLSHandshakeTimeout bounds a downstream TLS handshake. Default 10s.
	TLSHandshakeTimeout time.Duration
	// ProxyProtocolHeaderTimeout bounds the wait for the PROXY protocol header of a connection to a
	// listener that requires one (ClientTrafficPolicy proxyProtocol); a connection whose header
	// has not arrived by then is closed. Default 5s.
	ProxyProtocolHeaderTimeout time.Duration
	// MaxConnectionsPerListener caps the downstream TCP connections open at once on one listener
	// socket (HTTP, HTTPS, TLS and TCP listeners alike, PROXY protocol headers still being read
	// included). A connection accepted beyond it is closed at once and counted
	// (coxswain_proxy_listener_connections_rejected_cap_total), so idle or slow clients cannot
	// exhaust file descriptors and memory. Default 65536; negative: no cap.
	MaxConnectionsPerListener int
	// DrainTimeout bounds the graceful shutdown of a removed listener's connections; after it they
	// are closed. Close uses its context instead. Default 30s.
	DrainTimeout time.Duration

	// UpstreamDialTimeout bounds connecting to an endpoint of a cluster that sets no connect
	// timeout of its own (CoxswainBackendPolicy). Default 5s.
	UpstreamDialTimeout time.Duration
	// UpstreamResponseHeaderTimeout bounds the wait for an HTTP/1.1 endpoint's response header once
	// the request is written. Default 60s; routes with timeouts are bounded by those too. It does not
	// apply to h2c (gRPC) clusters, whose streams may stay quiet before their first message.
	UpstreamResponseHeaderTimeout time.Duration
	// UpstreamIdleConnTimeout closes a pooled upstream connection idle this long, unless its
	// cluster sets an idle timeout of its own. Default 90s.
	UpstreamIdleConnTimeout time.Duration
	// UpstreamMaxIdleConnsPerHost is the keep-alive pool size per endpoint. Default 256.
	UpstreamMaxIdleConnsPerHost int

	// StreamIdleTimeout closes a TCP or TLS route's connection after this long without a byte in
	// either direction. Default 1h. Connecting upstream is bounded by the cluster's connect timeout
	// (UpstreamDialTimeout by default), and reading a TLS ClientHello by TLSHandshakeTimeout.
	StreamIdleTimeout time.Duration
	// UDPSessionTimeout evicts a UDP client session idle this long. Default 10s.
	UDPSessionTimeout time.Duration
	// UDPMaxSessions caps the sessions of one UDP listener; datagrams from new clients beyond it
	// are dropped (and counted) until sessions expire. Default 16384.
	UDPMaxSessions int
}

// DefaultLimits are the limits a zero Limits stands for.
var DefaultLimits = Limits{
	ReadHeaderTimeout:             10 * time.Second,
	IdleTimeout:                   120 * time.Second,
	WriteTimeout:                  -1,
	RequestBodyTimeout:            60 * time.Second,
	MaxHeaderBytes:                64 << 10,
	MaxHeaderFields:               200,
	MaxConcurrentStreams:          250,
	HTTP2Server:                   HTTP2Own,
	TLSHandshakeTimeout:           10 * time.Second,
	ProxyProtocolHeaderTimeout:    5 * time.Second,
	DrainTimeout:                  30 * time.Second,
	UpstreamDialTimeout:           5 * time.Second,
	UpstreamResponseHeaderTimeout: 60 * time.Second,
	UpstreamIdleConnTimeout:       90 * time.Second,
	UpstreamMaxIdleConnsPerHost:   256,
	StreamIdleTimeout:             time.Hour,
	UDPSessionTimeout:             10 * time.Second,
	UDPMaxSessions:                16384,
	MaxConnectionsPerListener:     65536,
}

// withDefaults fills zero fields from DefaultLimits.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	dur := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	dur(&l.ReadHeaderTimeout, d.ReadHeaderTimeout)
	dur(&l.IdleTimeout, d.IdleTimeout)
	dur(&l.WriteTimeout, d.WriteTimeout)
	dur(&l.RequestBodyTimeout, d.RequestBodyTimeout)
	dur(&l.TLSHandshakeTimeout, d.TLSHandshakeTimeout)
	dur(&l.ProxyProtocolHeaderTimeout, d.ProxyProtocolHeaderTimeout)
	dur(&l.DrainTimeout, d.DrainTimeout)
	dur(&l.UpstreamDialTimeout, d.UpstreamDialTimeout)
	dur(&l.UpstreamResponseHeaderTimeout, d.UpstreamResponseHeaderTimeout)
	dur(&l.UpstreamIdleConnTimeout, d.UpstreamIdleConnTimeout)
	dur(&l.StreamIdleTimeout, d.StreamIdleTimeout)
	dur(&l.UDPSessionTimeout, d.UDPSessionTimeout)
	if l.UDPMaxSessions == 0 {
		l.UDPMaxSessions = d.UDPMaxSessions
	}
	if l.MaxConnectionsPerListener == 0 {
		l.MaxConnectionsPerListener = d.MaxConnectionsPerListener
	}
	if l.MaxHeaderFields == 0 {
		l.MaxHeaderFields = d.MaxHeaderFields
	}
	if l.MaxHeaderBytes == 0 {
		l.MaxHeaderBytes = d.MaxHeaderBytes
	}
	if l.HTTP2Server == "" {
		l.HTTP2Server = d.HTTP2Server
	}
	if l.MaxConcurrentStreams == 0 {
		l.MaxConcurrentStreams = d.MaxConcurrentStreams
	}
	if l.UpstreamMaxIdleConnsPerHost == 0 {
		l.UpstreamMaxIdleConnsPerHost = d.UpstreamMaxIdleConnsPerHost
	}
	return l
}

// Positive returns d, or 0 when d is negative: net/http spells "no limit" as 0.
func Positive(d time.Duration) time.Duration {
	if d < 0 {
		return 0
	}
	return d
}
