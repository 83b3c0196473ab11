package translator

import (
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Listeners sharing a port must be distinct (Gateway API "Distinct Listeners"): HTTP, HTTPS and
// TLS listeners by hostname, TCP and UDP ones by port alone. Listeners of different protocols
// never share a port: HTTP, TCP and UDP cannot be told apart from anything else, and HTTPS and
// TLS, though SNI could tell them apart, are served by different listener modules on one socket
// (the spec lets an implementation call such a combination incompatible). TLS listeners in
// Passthrough and Terminate mode do share a port (mixed mode): SNI selects the server.

// protocolFamily groups protocols that may share one port.
func protocolFamily(p gwapiv1.ProtocolType) string {
	return string(p)
}

// transport is the socket type a protocol binds; ports of different transports never collide.
func transport(p gwapiv1.ProtocolType) string {
	if p == gwapiv1.UDPProtocolType {
		return "udp"
	}
	return "tcp"
}

// distinguishesByHostname reports whether listeners of p on one port are told apart by hostname.
func distinguishesByHostname(p gwapiv1.ProtocolType) bool {
	switch p {
	case gwapiv1.HTTPProtocolType, gwapiv1.HTTPSProtocolType, gwapiv1.TLSProtocolType:
		return true
	}
	return false
}

type portKey struct {
	port      int32
	transport string
}

// gatewayConflicts marks the indistinct listeners of one Gateway. No listener wins a conflict:
// every listener involved is Conflicted and not accepted, as the spec requires.
func (t *session) gatewayConflicts(g *gatewayState) {
	byPort := map[portKey][]*listenerState{}
	for _, l := range g.listeners {
		if !l.accepted.ok || l.owner != nil {
			continue // unsupported or invalid listeners take part in nothing; ListenerSets' come later
		}
		k := portKey{int32(l.spec.Port), transport(l.spec.Protocol)}
		byPort[k] = append(byPort[k], l)
	}
	for _, ls := range byPort {
		families := map[string]bool{}
		for _, l := range ls {
			families[protocolFamily(l.spec.Protocol)] = true
		}
		if len(families) > 1 {
			for _, l := range ls {
				t.conflict(l, gwapiv1.ListenerReasonProtocolConflict,
					fmt.Sprintf("port %d is used by listeners of incompatible protocols", l.spec.Port))
			}
			continue
		}
		for i, a := range ls {
			for j, b := range ls {
				if i == j {
					continue
				}
				if !distinguishesByHostname(a.spec.Protocol) {
					t.conflict(a, gwapiv1.ListenerReasonProtocolConflict,
						fmt.Sprintf("listener %q uses the same port %d", b.spec.Name, a.spec.Port))
					continue
				}
				if a.hostname != b.hostname {
					continue
				}
				if a.spec.Protocol != b.spec.Protocol {
					t.conflict(a, gwapiv1.ListenerReasonProtocolConflict,
						fmt.Sprintf("listener %q uses the same port %d and hostname %q with protocol %s", b.spec.Name, a.spec.Port, a.hostname, b.spec.Protocol))
				} else {
					t.conflict(a, gwapiv1.ListenerReasonHostnameConflict,
						fmt.Sprintf("listener %q uses the same port %d, protocol and hostname %q", b.spec.Name, a.spec.Port, a.hostname))
				}
			}
		}
	}
}

// conflict marks l Conflicted. Such a listener is not accepted either (reason Invalid, as the
// conformance suite expects) and never reaches the snapshot.
func (t *session) conflict(l *listenerState, reason gwapiv1.ListenerConditionReason, msg string) {
	if l.conflicted.ok {
		return
	}
	named := l.field("") + ": " + msg // the conditions name the listener's path, as the problem does
	l.conflicted = condState{ok: true, reason: string(reason), msg: named}
	l.accepted = condState{reason: string(gwapiv1.ListenerReasonInvalid), msg: "Listener is conflicted: " + named}
	if l.owner != nil {
		// A ListenerSet listener loses to the listeners before it (listenerset.go): its
		// conditions say which conflict, as the spec asks.
		l.accepted = condState{reason: string(reason), msg: "Listener is conflicted: " + named}
	}
	t.listenerProblem(l, "", reason, msg)
}

// portClaim is a socket a programmed listener of an earlier Gateway will bind.
type portClaim struct {
	address  string
	listener *listenerState
}

// crossGatewayConflicts lets listeners of different Gateways share sockets. Same address, port
// and protocol: they share one IR listener (identical hostnames merge into one server, unless
// their TLS differs). A different protocol family on the same port is a ProtocolConflict for the
// newer Gateway; the older one keeps the port. So is a port bound on all addresses by one Gateway
// and on a specific address by another, which no socket API lets both have (PortUnavailable).
func (t *session) crossGatewayConflicts() {
	claims := map[portKey][]portClaim{}
	for _, g := range t.gateways {
		if g.rejectReason != "" {
			continue
		}
		for _, l := range g.listeners {
			if !l.bound() {
				continue
			}
			k := portKey{int32(t.bindPort(l)), transport(l.spec.Protocol)}
			if t.claimConflicts(l, claims[k]) {
				continue
			}
			for _, a := range g.addresses {
				claims[k] = append(claims[k], portClaim{address: a, listener: l})
			}
		}
	}
}

// claimConflicts checks l against the earlier claims on its port and marks it when it loses.
func (t *session) claimConflicts(l *listenerState, claims []portClaim) bool {
	for _, a := range l.gw.addresses {
		for _, c := range claims {
			o := c.listener
			if o.gw == l.gw {
				continue
			}
			if a != c.address && a != "" && c.address != "" {
				continue
			}
			owner := o.gw.key.String()
			switch {
			case a != c.address:
				msg := fmt.Sprintf("port %d is bound on address %q by Gateway %s", l.spec.Port, displayAddr(c.address), owner)
				t.rejectListener(l, "port", gwapiv1.ListenerReasonPortUnavailable, msg)
				return true
			case protocolFamily(o.spec.Protocol) != protocolFamily(l.spec.Protocol) ||
				(!distinguishesByHostname(l.spec.Protocol)):
				t.conflict(l, gwapiv1.ListenerReasonProtocolConflict,
					fmt.Sprintf("port %d is used with protocol %s by Gateway %s", l.spec.Port, o.spec.Protocol, owner))
				return true
			case o.hostname != l.hostname:
			case o.spec.Protocol != l.spec.Protocol:
				t.conflict(l, gwapiv1.ListenerReasonProtocolConflict,
					fmt.Sprintf("port %d and hostname %q are used with protocol %s by Gateway %s", l.spec.Port, l.hostname, o.spec.Protocol, owner))
				return true
			case o.passthrough != l.passthrough || !slices.Equal(o.certs, l.certs):
				t.conflict(l, gwapiv1.ListenerReasonHostnameConflict,
					fmt.Sprintf("port %d and hostname %q are served with other certificates by Gateway %s", l.spec.Port, l.hostname, owner))
				return true
			case !sameListenerFilters(o, l):
				t.conflict(l, gwapiv1.ListenerReasonHostnameConflict,
					fmt.Sprintf("port %d and hostname %q are served with other listener filters by Gateway %s", l.spec.Port, l.hostname, owner))
			case !proto.Equal(o.clientValidation, l.clientValidation):
				t.conflict(l, gwapiv1.ListenerReasonHostnameConflict,
					fmt.Sprintf("port %d and hostname %q are served with another client certificate validation by Gateway %s", l.spec.Port, l.hostname, owner))
				return true
			}
		}
	}
	return false
}

func displayAddr(a string) string {
	if a == "" {
		return "*"
	}
	return a
}
