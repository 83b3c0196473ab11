package translator

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// AppProtocolH2C is the Service port appProtocol for cleartext HTTP/2 with prior knowledge.
const AppProtocolH2C = "kubernetes.io/h2c"

// granted reports whether a ReferenceGrant in toNS lets objects of fromGroup/fromKind in fromNS
// refer to toGroup/toKind toName. Same-namespace references need no grant; callers check that.
func (t *session) granted(fromGroup, fromKind, fromNS, toGroup, toKind, toNS, toName string) bool {
	for _, g := range t.grants[toNS] {
		from := false
		for _, f := range g.Spec.From {
			if string(f.Group) == fromGroup && string(f.Kind) == fromKind && string(f.Namespace) == fromNS {
				from = true
				break
			}
		}
		if !from {
			continue
		}
		for _, to := range g.Spec.To {
			if string(to.Group) == toGroup && string(to.Kind) == toKind && (to.Name == nil || *to.Name == "" || string(*to.Name) == toName) {
				return true
			}
		}
	}
	return false
}

// backendError is a backendRef that did not resolve, with the ResolvedRefs reason it reports.
type backendError struct {
	reason gwapiv1.RouteConditionReason
	msg    string
}

func (e *backendError) Error() string { return e.msg }

func backendErr(reason gwapiv1.RouteConditionReason, format string, args ...any) *backendError {
	return &backendError{reason: reason, msg: fmt.Sprintf(format, args...)}
}

// resolveBackend resolves a backendRef of route key to a Cluster name. With emit, the cluster
// (the Service port's ready endpoints) is recorded for the snapshot.
// l is the listener whose build asks (nil when none does): its Gateway is an ancestor of the
// BackendTLSPolicies on the Service, and presents its client certificate to it. own is the
// route's own cluster settings (nil for none): they make a variant of the cluster.
func (t *session) resolveBackend(key RouteKey, ref gwapiv1.BackendObjectReference, proto irv1.Cluster_Protocol, emit bool, l *listenerState, own *routeCluster) (string, *backendError) {
	group, kind := "", "Service"
	if ref.Group != nil {
		group = string(*ref.Group)
	}
	if ref.Kind != nil {
		kind = string(*ref.Kind)
	}
	ns := key.Namespace
	if ref.Namespace != nil && *ref.Namespace != "" {
		ns = string(*ref.Namespace)
	}
	if group != "" || kind != "Service" {
		return "", backendErr(gwapiv1.RouteReasonInvalidKind, "backendRef to %s %s/%s: only core Services are supported", groupKind(group, kind), ns, ref.Name)
	}
	if ns != key.Namespace && !t.granted(key.Group, key.Kind, key.Namespace, "", "Service", ns, string(ref.Name)) {
		return "", backendErr(gwapiv1.RouteReasonRefNotPermitted, "backendRef to Service %s/%s is not permitted by any ReferenceGrant", ns, ref.Name)
	}
	if ref.Port == nil {
		return "", backendErr(gwapiv1.RouteReasonUnsupportedValue, "backendRef to Service %s/%s has no port", ns, ref.Name)
	}
	svc := t.services[nn(ns, string(ref.Name))]
	if svc == nil {
		return "", backendErr(gwapiv1.RouteReasonBackendNotFound, "Service %s/%s does not exist", ns, ref.Name)
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return "", backendErr(gwapiv1.RouteReasonUnsupportedValue, "Service %s/%s is of type ExternalName, which is not supported", ns, ref.Name)
	}
	var sp *corev1.ServicePort
	transport := corev1.ProtocolTCP
	if proto == irv1.Cluster_UDP {
		transport = corev1.ProtocolUDP
	}
	for i := range svc.Spec.Ports {
		p := &svc.Spec.Ports[i]
		if p.Port == int32(*ref.Port) && (p.Protocol == transport || (p.Protocol == "" && transport == corev1.ProtocolTCP)) {
			sp = p
		}
	}
	if sp == nil {
		what := "port"
		if transport == corev1.ProtocolUDP {
			what = "UDP port"
		}
		return "", backendErr(gwapiv1.RouteReasonBackendNotFound, "Service %s/%s has no %s %d", ns, ref.Name, what, *ref.Port)
	}
	if proto == irv1.Cluster_H2C && !h2cAppProtocol(sp.AppProtocol) {
		return "", backendErr(gwapiv1.RouteReasonUnsupportedProtocol, "Service %s/%s port %d has appProtocol %q; this route kind needs cleartext HTTP/2 (%s)", ns, ref.Name, *ref.Port, *sp.AppProtocol, AppProtocolH2C)
	}
	name := fmt.Sprintf("%s/%s:%d", ns, ref.Name, *ref.Port)
	if suffix := clusterSuffix(proto, sp); suffix != "" {
		name += "/" + suffix
	}
	if own != nil {
		name += "/" + own.suffix // before the TLS suffixes, which trimTLSSuffixes takes off the end
	}
	var ut *irv1.UpstreamTLS
	if emit {
		ut = t.backendTLSFor(l, svc, sp, proto)
	}
	if ut != nil && proto == irv1.Cluster_TCP {
		name += "/tls" // TLSRoute Terminate re-encrypts; a TCPRoute or passthrough to the port does not
	}
	ut, client := withClientCert(ut, l)
	if client != "" {
		name += "/" + client
	}
	if emit {
		if _, ok := t.clusters[name]; !ok {
			c := t.cluster(name, svc, sp, proto)
			c.Tls = ut
			t.applyBackendPolicy(c, nn(svc.Namespace, svc.Name))
			own.apply(c)
			t.clusters[name] = c
		}
		t.recordCluster(name)
	}
	return name, nil
}

// cluster builds the Cluster of one Service port from its EndpointSlices: the slice port with
// the Service port's name gives the target port; only ready (or readiness-unknown) endpoints
// count; duplicates across slices are dropped.
func (t *session) cluster(name string, svc *corev1.Service, sp *corev1.ServicePort, proto irv1.Cluster_Protocol) *irv1.Cluster {
	c := &irv1.Cluster{Name: name, Protocol: proto}
	if proto == irv1.Cluster_HTTP1 && sp.AppProtocol != nil && *sp.AppProtocol == AppProtocolH2C {
		c.Protocol = irv1.Cluster_H2C
	}
	type ep struct {
		addr string
		port uint32
	}
	seen := map[ep]bool{}
	for _, es := range t.slices[nn(svc.Namespace, svc.Name)] {
		if es.AddressType != discoveryv1.AddressTypeIPv4 && es.AddressType != discoveryv1.AddressTypeIPv6 {
			continue
		}
		port, ok := slicePort(es, sp.Name)
		if !ok {
			continue
		}
		for _, e := range es.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			for _, a := range e.Addresses {
				addr, ok := t.endpointAddr(a)
				if !ok || seen[ep{addr, port}] {
					continue
				}
				seen[ep{addr, port}] = true
				c.Endpoints = append(c.Endpoints, &irv1.Endpoint{Address: addr, Port: port})
			}
		}
	}
	sort.Slice(c.Endpoints, func(i, j int) bool {
		a, b := c.Endpoints[i], c.Endpoints[j]
		if a.Address != b.Address {
			return a.Address < b.Address
		}
		return a.Port < b.Port
	})
	return c
}

func slicePort(es *discoveryv1.EndpointSlice, name string) (uint32, bool) {
	for _, p := range es.Ports {
		pn := ""
		if p.Name != nil {
			pn = *p.Name
		}
		if pn == name && p.Port != nil && *p.Port > 0 {
			return uint32(*p.Port), true
		}
	}
	return 0, false
}

// endpointAddr normalizes an endpoint address and drops the ones a proxy must not dial:
// unparsable, unspecified, link-local multicast, and loopback unless the options allow it.
func (t *session) endpointAddr(a string) (string, bool) {
	ip, err := netip.ParseAddr(a)
	if err != nil || ip.Zone() != "" {
		return "", false
	}
	ip = ip.Unmap()
	if ip.IsUnspecified() || ip.IsMulticast() {
		return "", false
	}
	if ip.IsLoopback() && !t.opts.AllowLoopbackEndpoints {
		return "", false
	}
	return ip.String(), true
}

// clusterProtocol is the protocol of the clusters kind's backendRefs resolve to.
func clusterProtocol(kind translation.RouteKind) irv1.Cluster_Protocol {
	if ck, ok := kind.(translation.ClusterKind); ok {
		return ck.ClusterProtocol()
	}
	return irv1.Cluster_HTTP1
}

// clusterSuffix tells apart the clusters of one Service port that are reached differently from
// the HTTP cluster an HTTPRoute makes of it: a layer-4 kind's TCP or UDP cluster, and the h2c
// cluster of a kind that needs HTTP/2 (GRPCRoute) when the port's appProtocol does not already
// say h2c (an HTTPRoute reaches such a port over HTTP/1.1).
func clusterSuffix(p irv1.Cluster_Protocol, sp *corev1.ServicePort) string {
	if p == irv1.Cluster_H2C && sp.AppProtocol != nil && *sp.AppProtocol == AppProtocolH2C {
		return ""
	}
	return protocolSuffix(p)
}

// protocolSuffix is the cluster name suffix of protocol p, when it has one.
func protocolSuffix(p irv1.Cluster_Protocol) string {
	switch p {
	case irv1.Cluster_TCP:
		return "tcp"
	case irv1.Cluster_UDP:
		return "udp"
	case irv1.Cluster_H2C:
		return "h2c"
	}
	return ""
}

// h2cAppProtocol reports whether a Service port may be reached over cleartext HTTP/2 by a kind
// that needs it: its appProtocol says so (kubernetes.io/h2c, or the common "h2c", "grpc" and
// "http2"), or says nothing, and then the route kind is what tells, as Gateway API allows.
func h2cAppProtocol(ap *string) bool {
	if ap == nil {
		return true
	}
	switch strings.ToLower(*ap) {
	case "", AppProtocolH2C, "h2c", "grpc", "http2":
		return true
	}
	return false
}
