package provision

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// ComponentGateway is the app.kubernetes.io/component of the shared mode's per-Gateway objects.
const ComponentGateway = "gateway"

// ServiceName is the name of a Gateway's VIP Service and identity ServiceAccount. The Gateway's
// own name, suffixed so that a user's Service named like the Gateway is not taken, and cut to
// the 63 characters a Service name may have.
func ServiceName(gw *gwapiv1.Gateway) string {
	const suffix = "-coxswain"
	name := gw.Name
	if len(name)+len(suffix) > 63 {
		name = strings.TrimRight(name[:63-len(suffix)], "-.")
	}
	return name + suffix
}

// vipService is the shared mode's Service for gw: its ports are the listener ports, its
// targetPorts the internal ports the shared pool binds for them. It has no selector: its
// endpoints are the controller's (vipEndpointSlices), since the pool runs in another namespace
// than the Service and a selector only selects pods of its own. clusterIP pins the Service to a static address ("" lets the API server pick).
// http3 are the listener ports whose HTTPS socket also serves HTTP/3 on UDP (the same internal
// port number, UDP): each gets a UDP Service port targeting the TCP socket's internal port.
func vipService(gw *gwapiv1.Gateway, md Metadata, typ corev1.ServiceType, ports map[PortKey]int32, http3 []int32, clusterIP string) *corev1.Service {
	svc := &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: gw.Namespace, Name: ServiceName(gw), Labels: md.Labels, Annotations: md.Annotations,
		},
		Spec: corev1.ServiceSpec{Type: typ, ClusterIP: clusterIP},
	}
	if clusterIP != "" {
		svc.Spec.Type = corev1.ServiceTypeClusterIP
	}
	if svc.Spec.Type == corev1.ServiceTypeLoadBalancer || svc.Spec.Type == corev1.ServiceTypeNodePort {
		// The client address reaches the proxy; ClientTrafficPolicy and logs need it.
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	}
	keys := make([]PortKey, 0, len(ports))
	for k := range ports {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keyLess(keys[i], keys[j]) })
	for _, k := range keys {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{
			Name:       fmt.Sprintf("%s-%d", strings.ToLower(string(k.Protocol)), k.Port),
			Protocol:   k.Protocol,
			Port:       k.Port,
			TargetPort: intstr.FromInt32(ports[k]),
		})
	}
	for _, p := range http3 {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{
			Name: fmt.Sprintf("udp-%d", p), Protocol: corev1.ProtocolUDP, Port: p,
			TargetPort: intstr.FromInt32(ports[PortKey{Port: p, Protocol: corev1.ProtocolTCP}]),
		})
	}
	sort.SliceStable(svc.Spec.Ports, func(i, j int) bool {
		a, b := svc.Spec.Ports[i], svc.Spec.Ports[j]
		return keyLess(PortKey{a.Port, a.Protocol}, PortKey{b.Port, b.Protocol})
	})
	return svc
}

// identity is the Gateway's ServiceAccount: the identity its proxies present (the dedicated
// mode's pods run as it) and the object GEP-1867 metadata is checked on. It holds no token.
func identity(gw *gwapiv1.Gateway, md Metadata) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: gw.Namespace, Name: ServiceName(gw), Labels: md.Labels, Annotations: md.Annotations,
		},
		AutomountServiceAccountToken: ptr.To(false),
	}
}
