package proxycmd

import (
	"flag"
	"time"

	"github.com/coxswain-labs/coxswain/core/proxy"
)

// ProxyFlags are the proxy limits a command that serves traffic exposes; zero keeps the default.
type ProxyFlags struct {
	udpSessionTimeout time.Duration
	udpMaxSessions    int
	tcpIdleTimeout    time.Duration
	upstreamConnect   time.Duration
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
}

// Limits are the flags as proxy limits.
func (p *ProxyFlags) Limits() proxy.Limits {
	return proxy.Limits{
		UDPSessionTimeout:   p.udpSessionTimeout,
		UDPMaxSessions:      p.udpMaxSessions,
		StreamIdleTimeout:   p.tcpIdleTimeout,
		UpstreamDialTimeout: p.upstreamConnect,
	}
}
