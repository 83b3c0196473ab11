package proxycmd

import (
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/coxswain-labs/coxswain/core/proxy"
)

// ProxyFlags are the proxy limits a command that serves traffic exposes; zero keeps the default.
type ProxyFlags struct {
	udpSessionTimeout time.Duration
	udpMaxSessions    int
	tcpIdleTimeout    time.Duration
	upstreamConnect   time.Duration
	proxyHeader       time.Duration
	maxConns          int
	readHeader        time.Duration
	bodyWait          time.Duration
	maxHeaderBytes    int
	maxHeaderFields   int
	tlsHandshake      time.Duration
	http2Server       http2ServerFlag
	settings          ModuleSettings
	observe           ObserveFlags
}

// Register adds the limit flags to fs.
func (p *ProxyFlags) Register(fs *flag.FlagSet) {
	d := proxy.DefaultLimits
	fs.DurationVar(&p.udpSessionTimeout, "proxy-udp-session-timeout", d.UDPSessionTimeout,
		"evict a UDPRoute client session after this long without a datagram either way")
	fs.IntVar(&p.udpMaxSessions, "proxy-udp-max-sessions", d.UDPMaxSessions,
		"most client sessions per UDP listener; datagrams from new clients beyond it are dropped")
	fs.DurationVar(&p.tcpIdleTimeout, "proxy-stream-idle-timeout", d.StreamIdleTimeout,
		"close a TCPRoute or TLSRoute connection after this long without a byte either way")
	fs.DurationVar(&p.upstreamConnect, "proxy-connect-timeout", d.UpstreamDialTimeout,
		"how long connecting to a backend endpoint may take")
	fs.DurationVar(&p.proxyHeader, "proxy-protocol-header-timeout", d.ProxyProtocolHeaderTimeout,
		"how long a connection to a listener that requires the PROXY protocol (ClientTrafficPolicy) may take to send its header")
	fs.IntVar(&p.maxConns, "proxy-max-connections", d.MaxConnectionsPerListener,
		"most downstream TCP connections open at once per listener socket; one accepted beyond it is closed at once (negative: no cap)")
	fs.DurationVar(&p.readHeader, "proxy-read-header-timeout", d.ReadHeaderTimeout,
		"how long a client may take to send an HTTP request header (slowloris bound)")
	fs.DurationVar(&p.bodyWait, "proxy-request-body-timeout", d.RequestBodyTimeout,
		"close an HTTP/1.1 connection whose client sends nothing for this long in the middle of a request body")
	fs.IntVar(&p.maxHeaderBytes, "proxy-max-header-bytes", d.MaxHeaderBytes,
		"largest HTTP request header (request line and fields) accepted; larger ones are answered 431")
	fs.IntVar(&p.maxHeaderFields, "proxy-max-header-fields", d.MaxHeaderFields,
		"most fields of an HTTP/1.1 request header; more are answered 431")
	fs.DurationVar(&p.tlsHandshake, "proxy-tls-handshake-timeout", d.TLSHandshakeTimeout,
		"how long a downstream TLS handshake (ClientHello included) may take")
	p.http2Server = http2ServerFlag(d.HTTP2Server)
	fs.Var(&p.http2Server, "proxy-http2-server",
		"inbound HTTP/2 server (HTTPS with ALPN h2, and h2c): \"own\" (the engine's, on x/net's framer) or \"stdlib\" (net/http's)")
	p.observe.Register(fs)
	fs.Var(&p.settings, "module-setting",
		"NAME=VALUE handed to the modules a snapshot loads (repeatable), for what is configured once per proxy rather than per route: ratelimit.redis.address=HOST:PORT (see docs/filters.md)")
}

// Observe are the request metrics and access log flags.
func (p *ProxyFlags) Observe() ObserveFlags { return p.observe }

// Settings are the --module-setting flags (proxy.Options.ModuleSettings); nil when none.
func (p *ProxyFlags) Settings() map[string]string {
	if len(p.settings) == 0 {
		return nil
	}
	return maps.Clone(map[string]string(p.settings))
}

// ModuleSettings is the repeatable --module-setting NAME=VALUE flag. A name given twice is an
// error, not "last one wins": two addresses for one store is a typo worth stopping for.
type ModuleSettings map[string]string

func (m *ModuleSettings) String() string {
	if m == nil || len(*m) == 0 {
		return ""
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(*m)) {
		parts = append(parts, k+"="+(*m)[k])
	}
	return strings.Join(parts, " ")
}

// Set adds one NAME=VALUE.
func (m *ModuleSettings) Set(v string) error {
	name, value, ok := strings.Cut(v, "=")
	name = strings.TrimSpace(name)
	if !ok || name == "" {
		return fmt.Errorf("want NAME=VALUE, got %q", v)
	}
	if *m == nil {
		*m = ModuleSettings{}
	}
	if _, dup := (*m)[name]; dup {
		return fmt.Errorf("%s is set twice", name)
	}
	(*m)[name] = value
	return nil
}

// Limits are the flags as proxy limits.
func (p *ProxyFlags) Limits() proxy.Limits {
	return proxy.Limits{
		UDPSessionTimeout:   p.udpSessionTimeout,
		UDPMaxSessions:      p.udpMaxSessions,
		StreamIdleTimeout:   p.tcpIdleTimeout,
		UpstreamDialTimeout: p.upstreamConnect,

		ProxyProtocolHeaderTimeout: p.proxyHeader,
		MaxConnectionsPerListener:  p.maxConns,
		ReadHeaderTimeout:          p.readHeader,
		RequestBodyTimeout:         p.bodyWait,
		MaxHeaderBytes:             p.maxHeaderBytes,
		MaxHeaderFields:            p.maxHeaderFields,
		TLSHandshakeTimeout:        p.tlsHandshake,
		HTTP2Server:                string(p.http2Server),
	}
}

// http2ServerFlag is --proxy-http2-server: one of proxy.HTTP2Own, proxy.HTTP2Stdlib.
type http2ServerFlag string

func (f *http2ServerFlag) String() string { return string(*f) }

func (f *http2ServerFlag) Set(v string) error {
	if v != proxy.HTTP2Own && v != proxy.HTTP2Stdlib {
		return fmt.Errorf("want %q or %q, got %q", proxy.HTTP2Own, proxy.HTTP2Stdlib, v)
	}
	*f = http2ServerFlag(v)
	return nil
}
