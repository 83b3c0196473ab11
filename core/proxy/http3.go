package proxy

import (
	"fmt"
	"net"
	"strconv"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// HTTP/3 on an HTTPS listener. The IR has one listener (protocol HTTPS, with http3 set); the
// engine makes two sockets of it: the TCP one of listener.https, and a UDP one on the same
// address and port served by the "listener.http3" module. Both serve the same compiled listener
// (servers, certificates, routes, filters, metrics), so an HTTP/3 request is routed exactly as
// an HTTP/2 one is, on the table current when it arrives. The UDP socket is an ordinary socket
// of the pool: it survives every snapshot that keeps the listener's HTTP/3 (QUIC connections
// live on, as keep-alive TCP connections do), fails to bind and is retried on its own, and is
// closed when HTTP/3 is turned off.

// HTTP3ModuleID is the listener module that serves the UDP socket of an HTTPS listener whose IR
// asks for HTTP/3. It must be a PacketListener.
const HTTP3ModuleID core.ModuleID = "listener.http3"

// HTTP3Protocol is the protocol of that socket in Bound, Failed and listener names.
const HTTP3Protocol = "HTTP3"

// http3Listener builds the UDP half of tcp, an HTTPS listener whose IR l asks for HTTP/3. Its
// state is a copy of tcp's sharing everything compiled (the table reference, servers,
// certificates, observers), under its own name, so that Bound and Failed tell the two sockets
// apart. It also gives tcp's state the Alt-Svc value its responses advertise.
func (b *builder) http3Listener(l *irv1.Listener, tcp *builtListener) (*builtListener, error) {
	if l.GetProtocol() != "HTTPS" {
		return nil, fmt.Errorf("http3 is set on a %s listener; only HTTPS listeners serve HTTP/3", l.GetProtocol())
	}
	sl, err := core.Load[StreamListener](b.bc, &irv1.ModuleConfig{Id: string(HTTP3ModuleID)})
	if err != nil {
		return nil, err
	}
	if _, ok := sl.(PacketListener); !ok {
		return nil, fmt.Errorf("module %s does not serve a UDP socket", HTTP3ModuleID)
	}
	if err := sl.Check(l); err != nil {
		return nil, fmt.Errorf("module %s: %w", HTTP3ModuleID, err)
	}
	h3 := l.GetHttp3()
	port := h3.GetAdvertisedPort()
	if port == 0 {
		port = l.GetPort()
	}
	if port != 0 { // port 0 (tests) binds an ephemeral port: nothing to advertise in advance
		// Every response's header map shares this slice; its capacity of 1 makes an append (an
		// upstream's own Alt-Svc, a filter's) copy it rather than write into it.
		tcp.state.altSvc = []string{`h3=":` + strconv.FormatUint(uint64(port), 10) + `"; ma=86400`}
	}
	name := HTTP3ListenerName(l)
	state := *tcp.state
	state.Name, state.Protocol, state.altSvc = name, HTTP3Protocol, nil
	state.allow0RTT = h3.GetAllow_0Rtt()
	head := listenerHead(l)
	head.Name, head.Protocol = name, HTTP3Protocol
	return &builtListener{ir: head, key: sockKey{address: l.GetAddress(), port: l.GetPort(), network: "udp"},
		module: HTTP3ModuleID, sl: sl, state: &state}, nil
}

// HTTP3ListenerName is the name of an HTTPS listener's UDP socket in Bound, Failed and the
// listener statistics: "<address>:<port>/HTTP3".
func HTTP3ListenerName(l *irv1.Listener) string {
	return net.JoinHostPort(l.GetAddress(), strconv.FormatUint(uint64(l.GetPort()), 10)) + "/" + HTTP3Protocol
}

// Allow0RTT reports whether the listener accepts 0-RTT early data (HTTP/3 only), in the table this
// state belongs to.
func (ls *ListenerState) Allow0RTT() bool { return ls.allow0RTT }
