// Package translatortest holds fixtures for tests and benchmarks of the translator and its users.
package translatortest

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller/translator"
)

// The group kinds of the Gateway API route resources, for Store.Add in tests.
var (
	HTTPRoute = schema.GroupKind{Group: gwapiv1.GroupName, Kind: "HTTPRoute"}
	GRPCRoute = schema.GroupKind{Group: gwapiv1.GroupName, Kind: "GRPCRoute"}
	TCPRoute  = schema.GroupKind{Group: gwapiv1.GroupName, Kind: "TCPRoute"}
	TLSRoute  = schema.GroupKind{Group: gwapiv1.GroupName, Kind: "TLSRoute"}
	UDPRoute  = schema.GroupKind{Group: gwapiv1.GroupName, Kind: "UDPRoute"}
)

// SyntheticStore is one Gateway with an HTTP listener and n HTTPRoutes, each on its own hostname
// with two rules, all sending to one Service with three endpoints.
func SyntheticStore(n int) *translator.Store {
	ns := "bench"
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 1, CreationTimestamp: metav1.NewTime(time.Unix(1, 0))}
	}
	port := gwapiv1.PortNumber(8080)
	s := &translator.Store{
		GatewayClasses: []*gwapiv1.GatewayClass{{ObjectMeta: metav1.ObjectMeta{Name: "coxswain", Generation: 1},
			Spec: gwapiv1.GatewayClassSpec{ControllerName: translator.DefaultControllerName}}},
		Gateways: []*gwapiv1.Gateway{{ObjectMeta: meta("gw"), Spec: gwapiv1.GatewaySpec{GatewayClassName: "coxswain",
			Listeners: []gwapiv1.Listener{{Name: "http", Port: 8080, Protocol: gwapiv1.HTTPProtocolType}}}}},
		Namespaces: []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: ns}}},
		Services: []*corev1.Service{{ObjectMeta: meta("backend"), Spec: corev1.ServiceSpec{
			ClusterIP: "10.0.0.10", Ports: []corev1.ServicePort{{Name: "http", Port: 8080, Protocol: corev1.ProtocolTCP}}}}},
	}
	ready := true
	pname, pnum := "http", int32(8080)
	slice := &discoveryv1.EndpointSlice{ObjectMeta: meta("backend-1"), AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{{Name: &pname, Port: &pnum}}}
	slice.Labels = map[string]string{discoveryv1.LabelServiceName: "backend"}
	for i := 1; i <= 3; i++ {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.99.1.%d", i)},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready}})
	}
	s.EndpointSlices = []*discoveryv1.EndpointSlice{slice}
	prefix := gwapiv1.PathMatchPathPrefix
	for i := range n {
		r := &gwapiv1.HTTPRoute{ObjectMeta: meta(fmt.Sprintf("route-%d", i))}
		r.Spec.ParentRefs = []gwapiv1.ParentReference{{Name: "gw"}}
		r.Spec.Hostnames = []gwapiv1.Hostname{gwapiv1.Hostname(fmt.Sprintf("r%d.example.com", i))}
		for _, p := range []string{"/a", "/b"} {
			r.Spec.Rules = append(r.Spec.Rules, gwapiv1.HTTPRouteRule{
				Matches: []gwapiv1.HTTPRouteMatch{{Path: &gwapiv1.HTTPPathMatch{Type: &prefix, Value: &p}}},
				BackendRefs: []gwapiv1.HTTPBackendRef{{BackendRef: gwapiv1.BackendRef{
					BackendObjectReference: gwapiv1.BackendObjectReference{Name: "backend", Port: &port}}}},
			})
		}
		s.Add(HTTPRoute, r)
	}
	return s
}
