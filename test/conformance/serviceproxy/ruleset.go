// Package serviceproxy is the conformance harness's kube-proxy: it makes Service cluster IPs
// work for connections that start in the harness's network namespace, where the suite's HTTP,
// gRPC, TLS, TCP and UDP clients run. Like kube-proxy's nftables mode, in miniature: it watches
// Services and EndpointSlices and programs one nftables table that DNATs ClusterIP:port to a
// ready endpoint's address and port, picked at random per connection (numgen). ClusterIP only
// (no NodePort, LoadBalancer, external IPs or session affinity), IPv4, TCP and UDP, and only
// the output hook: traffic from pods to cluster IPs is not translated (nothing in the suite's
// data path sends any: the proxies dial EndpointSlice endpoints).
//
// The cluster IPs exist nowhere but in that table: no interface holds them, and a packet to the
// Service range that no rule translates (a port the Service does not have, a Service without
// ready endpoints, an address no Service has) is rejected at once, as kube-proxy does, rather
// than left to time out.
package serviceproxy

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// Table is the nftables table (family ip) the proxy owns; nothing else is touched.
const Table = "coxswain-services"

// Endpoint is one destination of a Service port.
type Endpoint struct {
	Addr netip.Addr
	Port int32
}

// Backend is a Service port with its ready endpoints.
type Backend struct {
	// Name is ns/name:port/protocol, for the rules' comments.
	Name      string
	ClusterIP netip.Addr
	Protocol  corev1.Protocol // TCP or UDP
	Port      int32
	Endpoints []Endpoint
}

// Backends are the Service ports of services, each with the ready endpoints its EndpointSlices
// list for it (matched by port name and protocol, as kube-proxy does), sorted by cluster IP,
// port and protocol. Headless Services, non-IPv4 cluster IPs and protocols other than TCP and UDP
// are left out.
func Backends(services []*corev1.Service, endpointSlices []*discoveryv1.EndpointSlice) []Backend {
	byService := map[string][]*discoveryv1.EndpointSlice{}
	for _, s := range endpointSlices {
		name := s.Labels[discoveryv1.LabelServiceName]
		if name == "" || s.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		byService[s.Namespace+"/"+name] = append(byService[s.Namespace+"/"+name], s)
	}
	var out []Backend
	for _, svc := range services {
		ip, err := netip.ParseAddr(svc.Spec.ClusterIP)
		if err != nil || !ip.Is4() {
			continue // headless ("None"), not allocated yet, or IPv6
		}
		for _, p := range svc.Spec.Ports {
			proto := cmp.Or(p.Protocol, corev1.ProtocolTCP)
			if proto != corev1.ProtocolTCP && proto != corev1.ProtocolUDP {
				continue
			}
			b := Backend{
				Name:      fmt.Sprintf("%s/%s:%d/%s", svc.Namespace, svc.Name, p.Port, proto),
				ClusterIP: ip, Protocol: proto, Port: p.Port,
				Endpoints: endpointsFor(byService[svc.Namespace+"/"+svc.Name], p.Name, proto),
			}
			out = append(out, b)
		}
	}
	slices.SortFunc(out, func(a, b Backend) int {
		return cmp.Or(a.ClusterIP.Compare(b.ClusterIP), cmp.Compare(a.Port, b.Port), strings.Compare(string(a.Protocol), string(b.Protocol)))
	})
	return out
}

// endpointsFor are the ready endpoints of the slices' port named portName, deduplicated (an
// endpoint may be listed by two slices while the controller moves it) and sorted.
func endpointsFor(endpointSlices []*discoveryv1.EndpointSlice, portName string, proto corev1.Protocol) []Endpoint {
	seen := map[Endpoint]bool{}
	var out []Endpoint
	for _, s := range endpointSlices {
		for _, sp := range s.Ports {
			if sp.Port == nil || deref(sp.Name) != portName || cmp.Or(deref(sp.Protocol), corev1.ProtocolTCP) != proto {
				continue
			}
			for _, e := range s.Endpoints {
				// A nil ready condition means ready (the EndpointSlice API says so).
				if e.Conditions.Ready != nil && !*e.Conditions.Ready || len(e.Addresses) == 0 {
					continue
				}
				addr, err := netip.ParseAddr(e.Addresses[0])
				if err != nil {
					continue
				}
				ep := Endpoint{Addr: addr, Port: *sp.Port}
				if !seen[ep] {
					seen[ep] = true
					out = append(out, ep)
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b Endpoint) int { return cmp.Or(a.Addr.Compare(b.Addr), cmp.Compare(a.Port, b.Port)) })
	return out
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// Ruleset is the nft script that replaces Table, in one transaction, with the rules for
// backends; serviceCIDR is the range whose untranslated packets are rejected.
//
//	table ip coxswain-services {
//	  chain output { type nat hook output priority -100; ip daddr . meta l4proto . th dport vmap { 10.96.0.7 . tcp . 80 : goto svc-0 } }
//	  chain svc-0 { numgen random mod 2 vmap { 0 : goto svc-0-ep-0, 1 : goto svc-0-ep-1 } }
//	  chain svc-0-ep-0 { meta l4proto tcp dnat to 10.244.0.5:3000 }
//	  chain unrouted { type filter hook output priority filter; ip daddr 10.96.0.0/16 reject }
//	}
//
// (-100 is dstnat's priority, a name nft 1.0.6 accepts only in prerouting.)
// A Service port without ready endpoints has no element, so its packets reach the reject chain
// untranslated. The filter chain sees packets after the nat chain: a translated one no longer
// has a Service address.
func Ruleset(backends []Backend, serviceCIDR netip.Prefix) string {
	var b strings.Builder
	// Declaring the table first makes the delete succeed when it does not exist yet.
	fmt.Fprintf(&b, "table ip %s\ndelete table ip %s\ntable ip %s {\n", Table, Table, Table)
	var elements, chains []string
	for i, be := range backends {
		if len(be.Endpoints) == 0 {
			continue
		}
		svc := fmt.Sprintf("svc-%d", i)
		proto := strings.ToLower(string(be.Protocol))
		elements = append(elements, fmt.Sprintf("%s . %s . %d : goto %s", be.ClusterIP, proto, be.Port, svc))
		var picks []string
		for j, ep := range be.Endpoints {
			chain := fmt.Sprintf("%s-ep-%d", svc, j)
			picks = append(picks, fmt.Sprintf("%d : goto %s", j, chain))
			chains = append(chains, fmt.Sprintf("\tchain %s {\n\t\tmeta l4proto %s dnat to %s comment %q\n\t}\n",
				chain, proto, netip.AddrPortFrom(ep.Addr, uint16(ep.Port)), be.Name))
		}
		chains = append(chains, fmt.Sprintf("\tchain %s {\n\t\tnumgen random mod %d vmap { %s } comment %q\n\t}\n",
			svc, len(picks), strings.Join(picks, ", "), be.Name))
	}
	b.WriteString("\tchain output {\n\t\ttype nat hook output priority -100; policy accept;\n")
	if len(elements) > 0 {
		fmt.Fprintf(&b, "\t\tip daddr . meta l4proto . th dport vmap { %s }\n", strings.Join(elements, ", "))
	}
	b.WriteString("\t}\n")
	for _, c := range chains {
		b.WriteString(c)
	}
	fmt.Fprintf(&b, "\tchain unrouted {\n\t\ttype filter hook output priority filter; policy accept;\n"+
		"\t\tip daddr %s meta l4proto tcp reject with tcp reset\n\t\tip daddr %s reject\n\t}\n}\n", serviceCIDR, serviceCIDR)
	return b.String()
}
