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
	tlstranslate "github.com/coxswain-labs/coxswain/modules/tlsroute/translate"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// TestStatusesByChangeFollowShadowing: given Changes, an Incremental looks only at the statuses
// of the routes not carried over and of those other routes' passes wrote into, this time or the
// time before (statuschanges.go, byChange). A younger TLSRoute shadowed by an older one on
// a.example.com is carried over from the third step on (its own object never changes) while the older
// one leaves and comes back and a third route elsewhere on the server changes: its status must
// lose the shadow when the older one leaves (it was written into last time only) and get it back
// when it returns (written into this time only), and keep it while the third route changes (its
// virtual host kept, the shadow replayed). After every step: the Result equals a full
// translation's, the statuses were looked at by change, and RouteStatusChanges lists the
// younger route whenever its status changed.
func TestStatusesByChangeFollowShadowing(t *testing.T) {
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
	tlsRoutes := schema.GroupKind{Group: gwapiv1.GroupName, Kind: "TLSRoute"}
	younger := tlsRoute("younger", 200, "a.example.com", 9000, 1)
	youngerKey := translator.RouteKey{Group: gwapiv1.GroupName, Kind: "TLSRoute", Namespace: "ns", Name: "younger"}
	olderV1 := tlsRoute("older", 100, "a.example.com", 9000, 1)
	olderV2 := tlsRoute("older", 100, "a.example.com", 9000, 2) // recreated: another object
	steps := []struct {
		older, other *gwapiv1.TLSRoute
		changed      []string // the routes the informers report
		shadowed     bool     // the younger route's status says the older one serves a.example.com
	}{
		{olderV1, tlsRoute("other", 300, "c.example.com", 9000, 1), nil, true},
		// The younger route is replayed (it was built at step 0), so carried from here on.
		{olderV1, tlsRoute("other", 300, "c.example.com", 9001, 2), []string{"other"}, true},
		{nil, tlsRoute("other", 300, "c.example.com", 9001, 2), []string{"older"}, false},
		{olderV2, tlsRoute("other", 300, "c.example.com", 9001, 2), []string{"older"}, true},
		// a.example.com is kept and its shadow replayed (vhosts.go): written into again, so
		// looked at when the older route leaves next.
		{olderV2, tlsRoute("other", 300, "c.example.com", 9000, 3), []string{"other"}, true},
		{nil, tlsRoute("other", 300, "c.example.com", 9000, 3), []string{"older"}, false},
		{nil, nil, []string{"other"}, false},
	}
	inc := translator.NewIncremental()
	var prevStore *translator.Store
	var prev *translator.Result
	objects := map[string]*gwapiv1.TLSRoute{}
	for step, s := range steps {
		store := &translator.Store{GatewayClasses: []*gwapiv1.GatewayClass{class}, Gateways: []*gwapiv1.Gateway{gw},
			Services: []*corev1.Service{svc}}
		cur := map[string]*gwapiv1.TLSRoute{"younger": younger, "older": s.older, "other": s.other}
		for _, name := range []string{"older", "younger", "other"} {
			if r := cur[name]; r != nil {
				if objects[name] != nil && objects[name].Generation == r.Generation {
					r = objects[name] // the same object while it does not change
				}
				objects[name] = r
				store.Add(tlsRoutes, r)
			}
		}
		var ch *translator.Changes
		if prevStore != nil {
			changed := map[types.NamespacedName]translation.Object{}
			for _, name := range s.changed {
				var obj translation.Object
				if r := cur[name]; r != nil {
					obj = objects[name]
				}
				changed[types.NamespacedName{Namespace: "ns", Name: name}] = obj
			}
			ch = &translator.Changes{Since: prevStore, Routes: map[schema.GroupKind]map[types.NamespacedName]translation.Object{tlsRoutes: changed}}
		}
		got := inc.TranslateChanges(context.Background(), store, opts, ch)
		want := translator.Translate(context.Background(), store, opts)
		if msg := diffResults(got, want); msg != "" {
			t.Fatalf("step %d: incremental differs from full: %s", step, msg)
		}
		if step > 0 && (!inc.UsedChanges() || !inc.StatusesByChange()) {
			t.Fatalf("step %d: used the changes %t, statuses by change %t; want both", step, inc.UsedChanges(), inc.StatusesByChange())
		}
		rs := got.Routes.Get(youngerKey)
		if rs == nil || len(rs.Parents) != 1 {
			t.Fatalf("step %d: the younger route's status %+v, want one parent", step, rs)
		}
		if shadowed := strings.Contains(conditionsText(rs.Parents[0].Conditions), "older"); shadowed != s.shadowed {
			t.Errorf("step %d: the younger route's status says it is shadowed: %t, want %t:\n%s", step, shadowed, s.shadowed,
				conditionsText(rs.Parents[0].Conditions))
		}
		if prev != nil {
			keys, ok := got.RouteStatusChanges(prev)
			if !ok {
				t.Fatalf("step %d: the Result does not know its route status changes", step)
			}
			listed := false
			for _, k := range keys {
				listed = listed || k == youngerKey
			}
			if changed := prev.Routes.Get(youngerKey) != rs; changed != listed {
				t.Errorf("step %d: the younger route's status changed %t, listed %t", step, changed, listed)
			}
		}
		prevStore, prev = store, got
	}
}
