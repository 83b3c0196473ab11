package translator_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	tlstranslate "github.com/coxswain-labs/coxswain/modules/tlsroute/translate"
)

// TestKeptVirtualHostKeepsShadows: a virtual host an Incremental keeps without gathering it
// (vhosts.go: every route of it settled, another hostname of the server changed) still tells the
// route it shadows so. Two TLSRoutes claim a.example.com on one passthrough listener, the older
// serves it; a third route on c.example.com of the same server changes twice. After each step
// the incremental result equals a full translation's (also once the third route is gone and back
// on another hostname: finishInPlace's removal and insertion), the a.example.com virtual host is the very
// message of the previous snapshot, and the younger route's status says it is shadowed.
func TestKeptVirtualHostKeepsShadows(t *testing.T) {
	reg := core.NewRegistry(tlstranslate.Kind)
	now := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	opts := translator.Options{Registry: reg, Now: func() metav1.Time { return now }}
	passthrough := gwapiv1.TLSModePassthrough
	host := gwapiv1.Hostname("*.example.com")
	class := &gwapiv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "coxswain", Generation: 1},
		Spec: gwapiv1.GatewayClassSpec{ControllerName: translator.DefaultControllerName}}
	gw := &gwapiv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gw", Generation: 1, UID: "gw"},
		Spec: gwapiv1.GatewaySpec{GatewayClassName: "coxswain", Listeners: []gwapiv1.Listener{{Name: "pass",
			Port: 8443, Protocol: gwapiv1.TLSProtocolType, Hostname: &host, TLS: &gwapiv1.ListenerTLSConfig{Mode: &passthrough}}}}}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app", Generation: 1},
		Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.1", Ports: []corev1.ServicePort{{Port: 9000}, {Port: 9001}}}}
	tlsRoute := func(name string, created int64, hostname string, port gwapiv1.PortNumber, gen int64) *gwapiv1.TLSRoute {
		return &gwapiv1.TLSRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name), Generation: gen,
			CreationTimestamp: metav1.NewTime(time.Unix(created, 0))}, Spec: gwapiv1.TLSRouteSpec{
			CommonRouteSpec: gwapiv1.CommonRouteSpec{ParentRefs: []gwapiv1.ParentReference{{Name: "gw"}}},
			Hostnames:       []gwapiv1.Hostname{gwapiv1.Hostname(hostname)},
			Rules: []gwapiv1.TLSRouteRule{{BackendRefs: []gwapiv1.BackendRef{{BackendObjectReference: gwapiv1.BackendObjectReference{
				Name: "app", Port: &port}}}}}}}
	}
	older, younger := tlsRoute("older", 100, "a.example.com", 9000, 1), tlsRoute("younger", 200, "a.example.com", 9000, 1)
	tlsRoutes := schema.GroupKind{Group: gwapiv1.GroupName, Kind: "TLSRoute"}
	youngerKey := translator.RouteKey{Group: gwapiv1.GroupName, Kind: "TLSRoute", Namespace: "ns", Name: "younger"}
	inc := translator.NewIncremental()
	var prevA *irv1.VirtualHost
	for step, other := range []*gwapiv1.TLSRoute{
		tlsRoute("other", 300, "c.example.com", 9000, 1),
		tlsRoute("other", 300, "c.example.com", 9001, 2),
		tlsRoute("other", 300, "d.example.com", 9001, 3),
		nil, // gone: its virtual host leaves the kept order, and its cluster the snapshot
		tlsRoute("other", 300, "b.example.com", 9001, 4),
	} {
		s := &translator.Store{GatewayClasses: []*gwapiv1.GatewayClass{class}, Gateways: []*gwapiv1.Gateway{gw},
			Services: []*corev1.Service{svc}}
		s.Add(tlsRoutes, older)
		s.Add(tlsRoutes, younger)
		if other != nil {
			s.Add(tlsRoutes, other)
		}
		got := inc.Translate(context.Background(), s, opts)
		want := translator.Translate(context.Background(), s, opts)
		if msg := diffResults(got, want); msg != "" {
			t.Fatalf("step %d: incremental differs from full: %s", step, msg)
		}
		if len(got.Snapshot.GetListeners()) == 0 {
			t.Fatalf("step %d: no listener; problems %v", step, got.Problems)
		}
		var a *irv1.VirtualHost
		for _, vh := range got.Snapshot.GetListeners()[0].GetServers()[0].GetVirtualHosts() {
			if vh.GetHostname() == "a.example.com" {
				a = vh
			}
		}
		if a == nil || len(a.GetRoutes()) != 1 || !strings.Contains(a.GetRoutes()[0].GetName(), "/older/") {
			t.Fatalf("step %d: a.example.com virtual host %v, want the older route alone", step, a)
		}
		if step > 0 && a != prevA {
			t.Errorf("step %d: a.example.com was built again, though none of its routes changed", step)
		}
		prevA = a
		rs := got.Routes.Get(youngerKey)
		if rs == nil || len(rs.Parents) != 1 || !strings.Contains(conditionsText(rs.Parents[0].Conditions), "older") {
			t.Errorf("step %d: the younger route's status does not say the older one serves a.example.com: %+v", step, rs)
		}
	}
}

func conditionsText(cs []metav1.Condition) string {
	var b strings.Builder
	for _, c := range cs {
		b.WriteString(c.Type + "=" + string(c.Status) + " " + c.Reason + ": " + c.Message + "\n")
	}
	return b.String()
}
