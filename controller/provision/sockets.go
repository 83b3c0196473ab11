package provision

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	policyv1a1 "github.com/coxswain-labs/coxswain/modules/api/policy/v1alpha1"
)

// Sockets are the listener sockets a Gateway's Service exposes.
type Sockets struct {
	// Keys are the sockets of the Gateway's listeners, its own and those of the ListenerSets
	// attached to it, by port and transport: each gets a Service port (and, shared, an internal
	// port).
	Keys []PortKey
	// HTTP3 are the HTTPS listener ports a ClientTrafficPolicy turns HTTP/3 on for, and that no
	// UDP listener of the Gateway holds: the proxies serve QUIC on the UDP socket of the same
	// (internal, when shared) port, so the Service needs a UDP port there too.
	HTTP3 []int32
}

// All are Keys and the HTTP/3 UDP sockets, by port then transport: a dedicated Service's ports,
// whose targetPorts are the listener ports themselves.
func (s Sockets) All() []PortKey {
	out := append([]PortKey(nil), s.Keys...)
	for _, p := range s.HTTP3 {
		out = append(out, PortKey{Port: p, Protocol: corev1.ProtocolUDP})
	}
	sort.Slice(out, func(i, j int) bool { return keyLess(out[i], out[j]) })
	return out
}

// gatewaySockets are the sockets of gw: its listeners', those of the ListenerSets its
// allowedListeners may admit, and the UDP sockets of HTTP/3. It is a superset of what the
// translator serves where the two could differ (a ListenerSet a namespace selector does not
// admit, HTTP/3 the translator withholds because listeners sharing the port disagree): a Service
// port nothing listens behind answers nothing, while a missing one would cut a served listener off.
func gatewaySockets(gw *gwapiv1.Gateway, sets []*gwapiv1.ListenerSet, policies []*policyv1a1.ClientTrafficPolicy) Sockets {
	seen := map[PortKey]bool{}
	https := map[int32]bool{}
	wantsHTTP3 := http3Asker(gw, policies)
	add := func(l gwapiv1.Listener, own bool) {
		k := PortKey{Port: int32(l.Port), Protocol: corev1.ProtocolTCP}
		if l.Protocol == gwapiv1.UDPProtocolType {
			k.Protocol = corev1.ProtocolUDP
		}
		seen[k] = true
		if l.Protocol == gwapiv1.HTTPSProtocolType && wantsHTTP3(l.Name, own) {
			https[int32(l.Port)] = true
		}
	}
	for _, l := range gw.Spec.Listeners {
		add(l, true)
	}
	for _, s := range sets {
		if !setOf(s, gw) || !mayAdmit(gw, s) {
			continue
		}
		for _, l := range s.Spec.Listeners {
			add(gwapiv1.Listener{Name: l.Name, Port: l.Port, Protocol: l.Protocol}, false)
		}
	}
	var out Sockets
	for k := range seen {
		out.Keys = append(out.Keys, k)
	}
	sort.Slice(out.Keys, func(i, j int) bool { return keyLess(out.Keys[i], out.Keys[j]) })
	for p := range https {
		if !seen[PortKey{Port: p, Protocol: corev1.ProtocolUDP}] { // a UDP listener keeps its socket
			out.HTTP3 = append(out.HTTP3, p)
		}
	}
	sort.Slice(out.HTTP3, func(i, j int) bool { return out.HTTP3[i] < out.HTTP3[j] })
	return out
}

func setOf(s *gwapiv1.ListenerSet, gw *gwapiv1.Gateway) bool {
	ref := s.Spec.ParentRef
	ns := s.Namespace
	if ref.Namespace != nil {
		ns = string(*ref.Namespace)
	}
	return ns == gw.Namespace && string(ref.Name) == gw.Name &&
		(ref.Kind == nil || *ref.Kind == "Gateway") && (ref.Group == nil || *ref.Group == gwapiv1.GroupName)
}

// mayAdmit is whether gw's allowedListeners can admit s: never without allowedListeners (the
// default is None); a namespace selector is taken as admitting (the translator decides).
func mayAdmit(gw *gwapiv1.Gateway, s *gwapiv1.ListenerSet) bool {
	al := gw.Spec.AllowedListeners
	if al == nil || al.Namespaces == nil || al.Namespaces.From == nil {
		return false
	}
	switch *al.Namespaces.From {
	case gwapiv1.NamespacesFromAll, gwapiv1.NamespacesFromSelector:
		return true
	case gwapiv1.NamespacesFromSame:
		return s.Namespace == gw.Namespace
	}
	return false
}

// http3Asker says whether the ClientTrafficPolicy a listener of gw takes enables HTTP/3, as the
// translator picks it (translator.translateClientTrafficPolicies): the oldest policy naming the
// listener (sectionName, the Gateway's own listeners only), else the oldest naming the Gateway.
func http3Asker(gw *gwapiv1.Gateway, policies []*policyv1a1.ClientTrafficPolicy) func(name gwapiv1.SectionName, own bool) bool {
	pols := make([]*policyv1a1.ClientTrafficPolicy, 0, len(policies))
	for _, p := range policies {
		if p.Namespace == gw.Namespace {
			pols = append(pols, p)
		}
	}
	sort.Slice(pols, func(i, j int) bool {
		a, b := pols[i].CreationTimestamp, pols[j].CreationTimestamp
		if !a.Equal(&b) {
			return a.Before(&b)
		}
		return pols[i].Name < pols[j].Name
	})
	var whole *policyv1a1.ClientTrafficPolicy
	section := map[gwapiv1.SectionName]*policyv1a1.ClientTrafficPolicy{}
	for _, p := range pols {
		for _, ref := range p.Spec.TargetRefs {
			if ref.Group != gwapiv1.GroupName || ref.Kind != "Gateway" || string(ref.Name) != gw.Name {
				continue
			}
			switch {
			case ref.SectionName == nil && whole == nil:
				whole = p
			case ref.SectionName != nil && section[*ref.SectionName] == nil:
				section[*ref.SectionName] = p
			}
		}
	}
	enabled := func(p *policyv1a1.ClientTrafficPolicy) bool {
		return p != nil && p.Spec.HTTP3 != nil && p.Spec.HTTP3.Enabled
	}
	return func(name gwapiv1.SectionName, own bool) bool {
		if p := section[name]; own && p != nil {
			return enabled(p)
		}
		return enabled(whole)
	}
}
