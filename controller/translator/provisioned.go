package translator

import (
	"fmt"
	"net/netip"
	"strings"

	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// PortTransport is one socket of a Gateway: a listener port and its transport ("tcp" or "udp").
type PortTransport struct {
	Port      int32
	Transport string
}

// Provisioned is what the controller's provisioner did for a Gateway that the shared proxy pool
// serves behind a VIP Service of its own (controller/provision). Its listeners are bound on every
// address at their internal ports, never at the listener port (many Gateways may listen on :80);
// its status.addresses are the Service's.
type Provisioned struct {
	// InternalPorts are the ports the shared proxies bind for each listener port and transport,
	// the VIP Service's targetPorts.
	InternalPorts map[PortTransport]uint32
	// Dedicated: the Gateway runs on proxies of its own (CoxswainGatewayParameters), which bind
	// its listeners at their own ports; InternalPorts is empty.
	Dedicated bool
	// Addresses are published in status.addresses. None: the Gateway is not programmed
	// (AddressReason, AddressMessage say why).
	Addresses      []gwapiv1.GatewayStatusAddress
	AddressReason  gwapiv1.GatewayConditionReason
	AddressMessage string
	// Notes are appended to the Accepted condition's message (reserved infrastructure keys that
	// were dropped).
	Notes []string
}

// bindPort is the port the proxies bind for l: its internal port when the Gateway is
// provisioned, else the listener port.
func (t *session) bindPort(l *listenerState) uint32 {
	if p, ok := t.opts.Provisioned[l.gw.key]; ok && !p.Dedicated {
		return p.InternalPorts[PortTransport{Port: int32(l.spec.Port), Transport: transport(l.spec.Protocol)}]
	}
	return uint32(l.spec.Port)
}

// provisionedAddresses validates spec.addresses for a provisioned Gateway, whose proxies bind
// every address: the addresses are the VIP Service's, so an IPAddress is the Service's clusterIP
// (the API server decides whether it is usable), a Hostname is published as is, and any other
// type is not supported.
func (t *session) provisionedAddresses(g *gatewayState, p *Provisioned) {
	var ips []string
	for i, a := range g.gw.Spec.Addresses {
		field := fmt.Sprintf("spec.addresses[%d]", i)
		switch typ := addressType(a.Type); typ {
		case gwapiv1.IPAddressType:
			if a.Value == "" {
				continue
			}
			ip, why := staticAddress(a.Value)
			if why != "" {
				msg := fmt.Sprintf("%q %s", a.Value, why)
				g.noAddress(gwapiv1.GatewayReasonAddressNotUsable, field+": "+msg)
				t.gatewayProblem(g, field+".value", string(gwapiv1.GatewayReasonAddressNotUsable), msg)
				continue
			}
			if s := ip.String(); !containsString(ips, s) {
				ips = append(ips, s)
			}
		case gwapiv1.HostnameAddressType:
		default:
			msg := fmt.Sprintf("address type %q is not supported; only IPAddress and Hostname", typ)
			g.reject(gwapiv1.GatewayReasonUnsupportedAddress, field+": "+msg)
			t.gatewayProblem(g, field+".type", string(gwapiv1.GatewayReasonUnsupportedAddress), msg)
		}
	}
	if len(ips) > 1 {
		msg := "a Gateway's VIP Service has one cluster IP; spec.addresses names " + strings.Join(ips, ", ")
		g.noAddress(gwapiv1.GatewayReasonAddressNotUsable, msg)
		t.gatewayProblem(g, "spec.addresses", string(gwapiv1.GatewayReasonAddressNotUsable), msg)
	}
	g.addresses = []string{""}
	if len(p.Addresses) == 0 {
		reason, msg := p.AddressReason, p.AddressMessage
		if reason == "" {
			reason, msg = gwapiv1.GatewayReasonAddressNotAssigned, "waiting for the Gateway's VIP Service to get an address"
		}
		g.noAddress(reason, msg)
	}
	g.published = p.Addresses
	g.notes = append(g.notes, p.Notes...)
}

// IsIPAddress reports whether v is an IP address as a status address of type IPAddress.
func IsIPAddress(v string) bool {
	_, err := netip.ParseAddr(v)
	return err == nil
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
