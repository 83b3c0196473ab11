package controller

import (
	"net/netip"
	"sort"

	"k8s.io/apimachinery/pkg/types"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller/translator"
)

// addressPool gives each of our Gateways that asks for an address (no spec.addresses, or an
// IPAddress entry without a value) an IP address of its own from a range (--gateway-address-pool):
// the proxy binds the Gateway's listeners on it and the status publishes it, so Gateways listening
// on the same port never share a socket. It is what a load-balancer controller does with a range
// of external IPs, for a range that is routed to the proxy's host.
//
// An address stays with its Gateway until the Gateway is deleted, stops asking, or another of our
// Gateways names that address in its spec.addresses: a static address is the user's choice and
// always wins over the pool's, so the pool never hands out an address some Gateway asked for by
// value (the one that held it gets another). A pool that starts (a new leader, a restart) takes
// each Gateway's address back from its status when it is still in the range and unclaimed, so
// addresses survive a failover.
type addressPool struct {
	prefix   netip.Prefix
	assigned map[types.NamespacedName]netip.Addr
}

func newAddressPool(prefix netip.Prefix) *addressPool {
	return &addressPool{prefix: prefix.Masked(), assigned: map[types.NamespacedName]netip.Addr{}}
}

// assign updates the assignments for the Gateways of classes (the class names that are ours) and
// returns them. A Gateway gets none when the range is used up; it then stays unprogrammed with
// reason AddressNotAssigned until an address frees up.
func (p *addressPool) assign(gateways []*gwapiv1.Gateway, classes map[string]bool) map[types.NamespacedName]netip.Addr {
	var want []*gwapiv1.Gateway
	keep := map[types.NamespacedName]bool{}
	taken := map[netip.Addr]bool{} // static addresses first: they are never the pool's to give
	for _, gw := range gateways {
		if !classes[string(gw.Spec.GatewayClassName)] {
			continue
		}
		for _, a := range staticAddresses(gw) {
			taken[a] = true
		}
		if asksForAddress(gw) {
			want = append(want, gw)
			keep[types.NamespacedName{Namespace: gw.Namespace, Name: gw.Name}] = true
		}
	}
	for k, a := range p.assigned {
		if keep[k] && !taken[a] {
			taken[a] = true
		} else {
			delete(p.assigned, k)
		}
	}
	// Oldest first, so when the range runs out the Gateways that had addresses keep them.
	sort.Slice(want, func(i, j int) bool {
		ti, tj := want[i].CreationTimestamp, want[j].CreationTimestamp
		if !ti.Equal(&tj) {
			return ti.Before(&tj)
		}
		return want[i].Namespace+"/"+want[i].Name < want[j].Namespace+"/"+want[j].Name
	})
	for _, gw := range want {
		k := types.NamespacedName{Namespace: gw.Namespace, Name: gw.Name}
		if _, ok := p.assigned[k]; ok {
			continue
		}
		a, ok := p.published(gw, taken)
		if !ok {
			a, ok = p.free(taken)
		}
		if ok {
			p.assigned[k] = a
			taken[a] = true
		}
	}
	out := make(map[types.NamespacedName]netip.Addr, len(p.assigned))
	for k, a := range p.assigned {
		out[k] = a
	}
	return out
}

// asksForAddress reports whether the Gateway asks for an address it does not name: no
// spec.addresses, or an IPAddress entry without a value (GatewayAddressEmpty), which the pool
// fills beside any addresses the Gateway names. A Gateway with an address type we do not support
// is not accepted and gets nothing.
func asksForAddress(gw *gwapiv1.Gateway) bool {
	empty := len(gw.Spec.Addresses) == 0
	for _, a := range gw.Spec.Addresses {
		if a.Type != nil && *a.Type != gwapiv1.IPAddressType {
			return false
		}
		if a.Value == "" && translator.RoutabilityUnsupported(a.Routability) == "" {
			empty = true // an entry whose routability we cannot give gets nothing (GEP-5093)
		}
	}
	return empty
}

// staticAddresses are the IP addresses the Gateway names in spec.addresses (as the translator
// binds them: IPv4-mapped IPv6 as IPv4); values that do not parse are the translator's to report.
func staticAddresses(gw *gwapiv1.Gateway) []netip.Addr {
	var out []netip.Addr
	for _, a := range gw.Spec.Addresses {
		if a.Value == "" || (a.Type != nil && *a.Type != gwapiv1.IPAddressType) {
			continue
		}
		if ip, err := netip.ParseAddr(a.Value); err == nil && ip.Zone() == "" {
			out = append(out, ip.Unmap())
		}
	}
	return out
}

// published is the Gateway's address from its live status, when it is ours to give and free.
func (p *addressPool) published(gw *gwapiv1.Gateway, taken map[netip.Addr]bool) (netip.Addr, bool) {
	for _, sa := range gw.Status.Addresses {
		if sa.Type != nil && *sa.Type != gwapiv1.IPAddressType {
			continue
		}
		a, err := netip.ParseAddr(sa.Value)
		if err == nil && p.usable(a) && !taken[a] {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// free is the lowest usable address nobody holds.
func (p *addressPool) free(taken map[netip.Addr]bool) (netip.Addr, bool) {
	for a := p.prefix.Addr(); p.prefix.Contains(a); a = a.Next() {
		if p.usable(a) && !taken[a] {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// usable excludes an IPv4 range's network and broadcast addresses (for ranges that have them).
func (p *addressPool) usable(a netip.Addr) bool {
	if !p.prefix.Contains(a) {
		return false
	}
	if !a.Is4() || p.prefix.Bits() >= 31 {
		return true
	}
	return a != p.prefix.Addr() && p.prefix.Contains(a.Next())
}
