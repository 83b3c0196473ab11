package translator

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapiv1b1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	httptranslate "github.com/coxswain-labs/coxswain/modules/httproute/translate"
)

// listenerFilterStore is tcpStore with an HTTP listener carrying filters and an HTTPRoute on it.
func listenerFilterStore(filters ...gwapiv1.ListenerFilter) *Store {
	store := tcpStore(gwapiv1.Listener{Name: "http", Port: 8080, Protocol: gwapiv1.HTTPProtocolType,
		Filters: &gwapiv1.ListenerFilters{Requests: filters}})
	store.Add(schema.GroupKind{Group: gwapiv1.GroupName, Kind: "HTTPRoute"}, &gwapiv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "web"},
		Spec: gwapiv1.HTTPRouteSpec{CommonRouteSpec: gwapiv1.CommonRouteSpec{ParentRefs: []gwapiv1.ParentReference{{Name: "gw", SectionName: ptr.To(gwapiv1.SectionName("http"))}}},
			Rules: []gwapiv1.HTTPRouteRule{{BackendRefs: []gwapiv1.HTTPBackendRef{{BackendRef: gwapiv1.BackendRef{BackendObjectReference: gwapiv1.BackendObjectReference{Name: "pg", Port: ptr.To(gwapiv1.PortNumber(5432))}}}}}}}})
	return store
}

func authListenerFilter(kind, name string) gwapiv1.ListenerFilter {
	return gwapiv1.ListenerFilter{Type: gwapiv1.ListenerFilterExtensionRef,
		ExtensionRef: &gwapiv1.LocalObjectReference{Group: authGroup, Kind: gwapiv1.Kind(kind), Name: gwapiv1.ObjectName(name)}}
}

func listenerConds(t *testing.T, res *Result, name string) map[string]metav1.Condition {
	t.Helper()
	st := res.Gateways[types.NamespacedName{Namespace: "db", Name: "gw"}]
	for _, l := range st.Listeners {
		if string(l.Name) == name {
			out := map[string]metav1.Condition{}
			for _, c := range l.Conditions {
				out[c.Type] = c
			}
			return out
		}
	}
	t.Fatalf("no listener %s in %+v", name, st)
	return nil
}

func serverOn(snap *irv1.Snapshot, port uint32) *irv1.Server {
	if l := listenerByPort(snap, port); l != nil && len(l.GetServers()) == 1 {
		return l.GetServers()[0]
	}
	return nil
}

func TestListenerFilters(t *testing.T) {
	reg := core.NewRegistry(extKind{}, httptranslate.Kind{}, authFilter{}, authResolver{})
	id := string(authFilter{}.CoxswainModule().ID)

	t.Run("ExtensionRefs in list order, the alias kind too, on the listener's Server", func(t *testing.T) {
		store := listenerFilterStore(authListenerFilter("CoxswainExternalAuth", "a"), authListenerFilter("ExternalAuth", "b"))
		store.Add(authGK, authObject("a", 0, ""), authObject("b", 1, ""))
		res := Translate(context.Background(), store, Options{Registry: reg})
		s := serverOn(res.Snapshot, 8080)
		if s == nil || len(s.Filters) != 2 || s.Filters[0].Id != id || s.Filters[1].Id != id {
			t.Fatalf("server %v: want the two auth filters", s)
		}
		if len(s.VirtualHosts) != 1 || len(s.VirtualHosts[0].Routes[0].Filters) != 0 {
			t.Errorf("the route must not get the listener's filters: %v", s.VirtualHosts)
		}
		c := listenerConds(t, res, "http")
		if c["Accepted"].Status != metav1.ConditionTrue || c["ResolvedRefs"].Status != metav1.ConditionTrue || c["Programmed"].Status != metav1.ConditionTrue {
			t.Errorf("conditions %+v", c)
		}
	})

	t.Run("a missing ExtensionRef object: InvalidListenerFilterRef, not served", func(t *testing.T) {
		store := listenerFilterStore(authListenerFilter("CoxswainExternalAuth", "a"), authListenerFilter("CoxswainExternalAuth", "missing"))
		store.Add(authGK, authObject("a", 0, ""))
		res := Translate(context.Background(), store, Options{Registry: reg})
		if serverOn(res.Snapshot, 8080) != nil {
			t.Errorf("a listener missing a filter must not be served")
		}
		c := listenerConds(t, res, "http")
		if r := c["ResolvedRefs"]; r.Status != metav1.ConditionFalse || r.Reason != "InvalidListenerFilterRef" ||
			!strings.Contains(r.Message, "spec.listeners[1].filters.requests[1]") {
			t.Errorf("ResolvedRefs %+v", r)
		}
		if c["Programmed"].Status != metav1.ConditionFalse {
			t.Errorf("Programmed %+v", c["Programmed"])
		}
	})

	t.Run("an auth backend in another namespace without a grant: RefNotPermitted", func(t *testing.T) {
		store := listenerFilterStore(authListenerFilter("CoxswainExternalAuth", "a"))
		svc := store.Services[0].DeepCopy()
		svc.Namespace = "auth"
		store.Services = append(store.Services, svc)
		store.Add(authGK, authObject("a", 0, "auth"))
		res := Translate(context.Background(), store, Options{Registry: reg})
		if r := listenerConds(t, res, "http")["ResolvedRefs"]; r.Reason != "RefNotPermitted" {
			t.Errorf("ResolvedRefs %+v", r)
		}
		store.ReferenceGrants = []*gwapiv1b1.ReferenceGrant{{ObjectMeta: metav1.ObjectMeta{Namespace: "auth", Name: "g"},
			Spec: gwapiv1b1.ReferenceGrantSpec{
				From: []gwapiv1b1.ReferenceGrantFrom{{Group: authGroup, Kind: "CoxswainExternalAuth", Namespace: "db"}},
				To:   []gwapiv1b1.ReferenceGrantTo{{Group: "", Kind: "Service"}},
			}}}
		res = Translate(context.Background(), store, Options{Registry: reg})
		if s := serverOn(res.Snapshot, 8080); s == nil || len(s.Filters) != 1 {
			t.Errorf("with the grant: server %v", s)
		}
	})

	t.Run("a kind no module serves: InvalidListenerFilterRef, as the GEP says", func(t *testing.T) {
		store := listenerFilterStore(gwapiv1.ListenerFilter{Type: gwapiv1.ListenerFilterExtensionRef,
			ExtensionRef: &gwapiv1.LocalObjectReference{Group: "example.com", Kind: "Nope", Name: "x"}})
		res := Translate(context.Background(), store, Options{Registry: reg})
		c := listenerConds(t, res, "http")
		if r := c["ResolvedRefs"]; r.Status != metav1.ConditionFalse || r.Reason != "InvalidListenerFilterRef" || !strings.Contains(r.Message, "no module filter.ext.example.com.Nope") {
			t.Errorf("ResolvedRefs %+v", r)
		}
	})

	t.Run("a filter type this build does not translate: Accepted=False UnsupportedValue", func(t *testing.T) {
		store := listenerFilterStore(gwapiv1.ListenerFilter{Type: gwapiv1.ListenerFilterExternalAuth,
			ExternalAuth: &gwapiv1.HTTPExternalAuthFilter{ExternalAuthProtocol: gwapiv1.HTTPRouteExternalAuthHTTPProtocol,
				BackendRef: gwapiv1.BackendObjectReference{Name: "pg", Port: ptr.To(gwapiv1.PortNumber(5432))}}})
		res := Translate(context.Background(), store, Options{Registry: reg})
		c := listenerConds(t, res, "http")
		if a := c["Accepted"]; a.Status != metav1.ConditionFalse || a.Reason != "UnsupportedValue" || !strings.Contains(a.Message, "filters.requests[0]") {
			t.Errorf("Accepted %+v", a)
		}
		if serverOn(res.Snapshot, 8080) != nil {
			t.Errorf("served without its filter")
		}
	})

	t.Run("on a TCP listener: InvalidListenerFilter", func(t *testing.T) {
		store := tcpStore()
		store.Gateways[0].Spec.Listeners[0].Filters = &gwapiv1.ListenerFilters{Requests: []gwapiv1.ListenerFilter{authListenerFilter("CoxswainExternalAuth", "a")}}
		store.Add(authGK, authObject("a", 0, ""))
		res := Translate(context.Background(), store, Options{Registry: reg})
		if a := listenerConds(t, res, "tcp")["Accepted"]; a.Reason != "InvalidListenerFilter" {
			t.Errorf("Accepted %+v", a)
		}
	})

	t.Run("two Gateways' listeners on one Server must agree on filters", func(t *testing.T) {
		store := listenerFilterStore(authListenerFilter("CoxswainExternalAuth", "a"))
		store.Add(authGK, authObject("a", 0, ""))
		other := store.Gateways[0].DeepCopy()
		other.Name, other.CreationTimestamp = "other", metav1.NewTime(metav1.Now().Add(1))
		other.Spec.Listeners = []gwapiv1.Listener{{Name: "http", Port: 8080, Protocol: gwapiv1.HTTPProtocolType}}
		store.Gateways = append(store.Gateways, other)
		res := Translate(context.Background(), store, Options{Registry: reg})
		st := res.Gateways[types.NamespacedName{Namespace: "db", Name: "other"}]
		var conflicted metav1.Condition
		for _, c := range st.Listeners[0].Conditions {
			if c.Type == "Conflicted" {
				conflicted = c
			}
		}
		if conflicted.Status != metav1.ConditionTrue || !strings.Contains(conflicted.Message, "other listener filters") {
			t.Errorf("newer Gateway's listener: Conflicted %+v", conflicted)
		}
		if s := serverOn(res.Snapshot, 8080); s == nil || len(s.Filters) != 1 {
			t.Errorf("the older listener keeps its filters: %v", s)
		}
	})
}
