package translate

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/controller/translator/translatortest"
)

// benchStore is one Gateway with two listeners and n HTTPRoutes of three rules each, every route
// with its own Service and EndpointSlice.
func benchStore(n int) *translator.Store {
	s := &translator.Store{
		GatewayClasses: []*gwapiv1.GatewayClass{{ObjectMeta: metav1.ObjectMeta{Name: "c"},
			Spec: gwapiv1.GatewayClassSpec{ControllerName: translator.DefaultControllerName}}},
		Gateways: []*gwapiv1.Gateway{{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gw"}, Spec: gwapiv1.GatewaySpec{
			GatewayClassName: "c",
			Listeners: []gwapiv1.Listener{
				{Name: "http", Port: 80, Protocol: gwapiv1.HTTPProtocolType},
				{Name: "alt", Port: 8080, Protocol: gwapiv1.HTTPProtocolType},
			},
		}}},
	}
	port := gwapiv1.PortNumber(8080)
	epPort := int32(8080)
	for i := range n {
		name := fmt.Sprintf("svc-%d", i)
		prefix := gwapiv1.PathMatchPathPrefix
		rules := make([]gwapiv1.HTTPRouteRule, 3)
		for j := range rules {
			v := fmt.Sprintf("/r%d/%d", i, j)
			rules[j] = gwapiv1.HTTPRouteRule{
				Matches:     []gwapiv1.HTTPRouteMatch{{Path: &gwapiv1.HTTPPathMatch{Type: &prefix, Value: &v}}},
				BackendRefs: []gwapiv1.HTTPBackendRef{{BackendRef: gwapiv1.BackendRef{BackendObjectReference: gwapiv1.BackendObjectReference{Name: gwapiv1.ObjectName(name), Port: &port}}}},
			}
		}
		s.Add(translatortest.HTTPRoute, &gwapiv1.HTTPRoute{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("route-%d", i)},
			Spec: gwapiv1.HTTPRouteSpec{
				CommonRouteSpec: gwapiv1.CommonRouteSpec{ParentRefs: []gwapiv1.ParentReference{{Name: "gw"}}},
				Hostnames:       []gwapiv1.Hostname{gwapiv1.Hostname(fmt.Sprintf("h%d.example.com", i%50))},
				Rules:           rules,
			},
		})
		s.Services = append(s.Services, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 8080}}}})
		s.EndpointSlices = append(s.EndpointSlices, &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: name}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Port: &epPort}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{fmt.Sprintf("10.%d.%d.1", i/250, i%250)}}},
		})
	}
	return s
}

func BenchmarkTranslate(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprint(n, "routes"), func(b *testing.B) {
			store := benchStore(n)
			opts := testOptions(nil)
			b.ReportAllocs()
			for b.Loop() {
				translator.Translate(context.Background(), store, opts)
			}
		})
	}
}
