package translator

import (
	"fmt"
	"strings"

	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// HTTP/3 (ClientTrafficPolicy spec.http3) is served on a UDP socket beside an HTTPS listener's
// TCP one, on the same address and port. A UDP listener (UDPRoutes) that would bind that socket
// keeps it: the HTTPS listener serves HTTP/1.1 and HTTP/2 only, its HTTP3 condition is False
// (UDPPortConflict) and the policy says where it was not applied. Nothing else changes: the UDP
// listener serves, and clients that learnt no Alt-Svc never try QUIC.

// ListenerConditionHTTP3 is the condition an HTTPS listener carries when a ClientTrafficPolicy
// asks for HTTP/3 on it: True when it is served, False (ListenerReasonUDPPortConflict) when a UDP
// listener holds the port.
const ListenerConditionHTTP3 = "coxswain-labs.dev/HTTP3"

// Reasons of ListenerConditionHTTP3.
const (
	ListenerReasonHTTP3Enabled                                    = "Enabled"
	ListenerReasonUDPPortConflict gwapiv1.ListenerConditionReason = "UDPPortConflict"
)

// http3Conflicts takes HTTP/3 away from every HTTPS IR listener whose UDP socket a UDP IR
// listener binds, and gives the Gateway listeners that asked for it their HTTP3 condition.
// members are the Gateway listeners of each IR listener.
func (t *session) http3Conflicts(ls []*irv1.Listener, members map[irListenerKey][]*listenerState) {
	for _, il := range ls {
		if il.GetHttp3() == nil {
			continue
		}
		k := irListenerKey{il.Address, il.Port, il.Protocol}
		udp := udpHolder(ls, il)
		for _, l := range members[k] {
			if udp == nil {
				udp = sameGatewayUDP(ls, members, l)
			}
		}
		for _, l := range members[k] {
			if !l.clientSettings().http3 {
				continue
			}
			if udp == nil {
				l.http3 = &condState{ok: true, reason: ListenerReasonHTTP3Enabled,
					msg: fmt.Sprintf("HTTP/3 is served on UDP port %d and advertised as port %d", il.Port, il.Http3.AdvertisedPort)}
				continue
			}
			msg := fmt.Sprintf("UDP port %d is bound by listener %s (%s) for UDPRoutes, which keeps it; HTTP/3 is not served here",
				il.Port, udp.Name, strings.Join(udpSources(udp), ", "))
			l.http3 = &condState{reason: string(ListenerReasonUDPPortConflict), msg: msg}
			t.listenerProblem(l, "", ListenerReasonUDPPortConflict, msg)
			if tg := l.clientPolicy; tg != nil {
				tg.blocked = appendOnce(tg.blocked, fmt.Sprintf("HTTP/3 on listener %s of Gateway %s: %s", l.spec.Name, l.gw.key, msg))
			}
		}
		if udp != nil {
			il.Http3 = nil
		}
	}
}

// udpHolder is the UDP IR listener that binds the UDP socket il's HTTP/3 would: the same port
// on the same address, or either on every address.
func udpHolder(ls []*irv1.Listener, il *irv1.Listener) *irv1.Listener {
	for _, o := range ls {
		if o.Protocol == "UDP" && o.Port == il.Port && (o.Address == il.Address || o.Address == "" || il.Address == "") {
			return o
		}
	}
	return nil
}

// sameGatewayUDP is the UDP IR listener of a UDP listener of l's Gateway on l's listener port.
// Without provisioning that is udpHolder's (the same port); a provisioned shared Gateway binds
// the two at different internal ports, but its VIP Service has one UDP port for the listener port,
// which the UDP listener keeps (provision.Sockets), so the HTTPS listener cannot have it either.
func sameGatewayUDP(ls []*irv1.Listener, members map[irListenerKey][]*listenerState, l *listenerState) *irv1.Listener {
	for _, o := range ls {
		if o.Protocol != "UDP" {
			continue
		}
		for _, m := range members[irListenerKey{o.Address, o.Port, o.Protocol}] {
			if m.gw == l.gw && m.spec.Port == l.spec.Port && m.spec.Protocol == gwapiv1.UDPProtocolType {
				return o
			}
		}
	}
	return nil
}

// udpSources names the Gateway listeners of a UDP IR listener.
func udpSources(il *irv1.Listener) []string {
	var out []string
	for _, s := range il.GetServers() {
		out = append(out, s.GetSources()...)
	}
	if len(out) == 0 {
		out = []string{"no Gateway listener"}
	}
	return out
}
