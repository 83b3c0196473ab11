package integration

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/test/integration/env"
)

func createClass(t testing.TB, e *env.Env, name, controllerName string) *gwapiv1.GatewayClass {
	t.Helper()
	if controllerName == "" {
		controllerName = translator.DefaultControllerName
	}
	gc, err := e.Gateway.GatewayV1().GatewayClasses().Create(ctxFor(t), &gwapiv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       gwapiv1.GatewayClassSpec{ControllerName: gwapiv1.GatewayController(controllerName)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return gc
}

func httpListener(name string, port int) gwapiv1.Listener {
	return gwapiv1.Listener{Name: gwapiv1.SectionName(name), Port: gwapiv1.PortNumber(port), Protocol: gwapiv1.HTTPProtocolType}
}

func createGateway(t testing.TB, e *env.Env, ns, name, class string, listeners ...gwapiv1.Listener) *gwapiv1.Gateway {
	t.Helper()
	gw, err := e.Gateway.GatewayV1().Gateways(ns).Create(ctxFor(t), &gwapiv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       gwapiv1.GatewaySpec{GatewayClassName: gwapiv1.ObjectName(class), Listeners: listeners},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return gw
}

// createService makes a Service with one port (80 → targetPort 8080, named "http") and one
// EndpointSlice holding addrs; backends listen on <addr>:8080.
func createService(t testing.TB, e *env.Env, ns, name string, addrs ...string) {
	t.Helper()
	_, err := e.Kube.CoreV1().Services(ns).Create(ctxFor(t), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{
			Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP,
		}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Kube.DiscoveryV1().EndpointSlices(ns).Create(ctxFor(t), endpointSlice(ns, name, addrs...), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func endpointSlice(ns, svc string, addrs ...string) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svc + "-slice",
			Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(8080)), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for _, a := range addrs {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{a},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	return es
}

// setEndpoints replaces the addresses of a Service's EndpointSlice.
func setEndpoints(t testing.TB, e *env.Env, ns, svc string, addrs ...string) {
	t.Helper()
	slices := e.Kube.DiscoveryV1().EndpointSlices(ns)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := slices.Get(ctxFor(t), svc+"-slice", metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Endpoints = endpointSlice(ns, svc, addrs...).Endpoints
		_, err = slices.Update(ctxFor(t), cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func parentRef(ns, gateway string) gwapiv1.ParentReference {
	return gwapiv1.ParentReference{Namespace: ptr.To(gwapiv1.Namespace(ns)), Name: gwapiv1.ObjectName(gateway)}
}

// backendRef is a reference to port 80 of a Service.
func backendRef(svc string, weight int32) gwapiv1.HTTPBackendRef {
	return gwapiv1.HTTPBackendRef{BackendRef: gwapiv1.BackendRef{
		BackendObjectReference: gwapiv1.BackendObjectReference{Name: gwapiv1.ObjectName(svc), Port: ptr.To(gwapiv1.PortNumber(80))},
		Weight:                 ptr.To(weight),
	}}
}

// prefixRule sends path prefix p to backends.
func prefixRule(p string, backends ...gwapiv1.HTTPBackendRef) gwapiv1.HTTPRouteRule {
	return gwapiv1.HTTPRouteRule{
		Matches:     []gwapiv1.HTTPRouteMatch{{Path: &gwapiv1.HTTPPathMatch{Type: ptr.To(gwapiv1.PathMatchPathPrefix), Value: ptr.To(p)}}},
		BackendRefs: backends,
	}
}

func httpRoute(ns, name string, parents []gwapiv1.ParentReference, hostnames []string, rules ...gwapiv1.HTTPRouteRule) *gwapiv1.HTTPRoute {
	r := &gwapiv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	r.Spec.ParentRefs = parents
	for _, h := range hostnames {
		r.Spec.Hostnames = append(r.Spec.Hostnames, gwapiv1.Hostname(h))
	}
	r.Spec.Rules = rules
	return r
}

func createRoute(t testing.TB, e *env.Env, r *gwapiv1.HTTPRoute) *gwapiv1.HTTPRoute {
	t.Helper()
	out, err := e.Gateway.GatewayV1().HTTPRoutes(r.Namespace).Create(ctxFor(t), r, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// updateRoute re-reads the route, applies change and updates it.
func updateRoute(t testing.TB, e *env.Env, ns, name string, change func(*gwapiv1.HTTPRoute)) *gwapiv1.HTTPRoute {
	t.Helper()
	routes := e.Gateway.GatewayV1().HTTPRoutes(ns)
	var out *gwapiv1.HTTPRoute
	// The controller's status writes race with this spec update: retry on conflict.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := routes.Get(ctxFor(t), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(cur)
		out, err = routes.Update(ctxFor(t), cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
