package translator

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// streamKind is a route kind the core knows nothing about (think TCPRoute): it proves the core
// passes — listener support, attachment, backends, status — are not HTTPRoute-specific.
type streamKind struct{}

func (k streamKind) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: "translate.route.stream", New: func() core.Module { return k }}
}

var streamGVK = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "StreamRoute"}

func (streamKind) API() translation.RouteAPI {
	return translation.NewAPI(streamGVK, "streamroutes", nil,
		func(r *streamRoute) *gwapiv1.RouteStatus { return &r.status }, nil)
}

func (streamKind) Protocols() []gwapiv1.ProtocolType {
	return []gwapiv1.ProtocolType{gwapiv1.TCPProtocolType}
}

func (streamKind) Route(o translation.Object) (translation.Route, bool) {
	r, ok := o.(*streamRoute)
	return r, ok
}

// streamRoute is both the object and its Route.
type streamRoute struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	parents []gwapiv1.ParentReference
	backend gwapiv1.BackendRef
	status  gwapiv1.RouteStatus
}

func (r *streamRoute) DeepCopyObject() runtime.Object { c := *r; return &c }

func (r *streamRoute) Object() translation.Object            { return r }
func (r *streamRoute) ParentRefs() []gwapiv1.ParentReference { return r.parents }
func (r *streamRoute) Hostnames() []gwapiv1.Hostname         { return nil }
func (r *streamRoute) Build(rc translation.RouteContext) []*translation.Entry {
	return []*translation.Entry{{Route: &irv1.Route{
		Match:    &irv1.ModuleConfig{Id: "route.stream"},
		Backends: []*irv1.Backend{rc.Backend("spec.rules[0].backendRefs[0]", r.backend, nil)},
	}}}
}

func TestPluggableRouteKind(t *testing.T) {
	port := gwapiv1.PortNumber(5432)
	route := &streamRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "pg"},
		parents:    []gwapiv1.ParentReference{{Name: "gw"}},
		backend:    gwapiv1.BackendRef{BackendObjectReference: gwapiv1.BackendObjectReference{Name: "pg", Port: &port}},
	}
	store := tcpStore(gwapiv1.Listener{Name: "http", Port: 80, Protocol: gwapiv1.HTTPProtocolType})
	store.Add(streamGVK.GroupKind(), route)
	res := Translate(context.Background(), store, Options{Registry: core.NewRegistry(streamKind{})})

	gw := res.Gateways[nn("db", "gw")]
	if gw == nil || len(gw.Listeners) != 2 {
		t.Fatalf("gateway status %+v", gw)
	}
	if l := gw.Listeners[0]; l.AttachedRoutes != 1 || len(l.SupportedKinds) != 1 || l.SupportedKinds[0].Kind != "StreamRoute" {
		t.Errorf("tcp listener: %+v", l)
	}
	if l := gw.Listeners[1]; l.Conditions[0].Reason != string(gwapiv1.ListenerReasonUnsupportedProtocol) {
		t.Errorf("http listener without an HTTP kind should be UnsupportedProtocol: %+v", l.Conditions[0])
	}
	rs := res.Routes.Get(RouteKey{Group: "example.com", Kind: "StreamRoute", Namespace: "db", Name: "pg"})
	if rs == nil || len(rs.Parents) != 1 || rs.Parents[0].Conditions[0].Status != metav1.ConditionTrue {
		t.Fatalf("route status %+v", rs)
	}
	snap := res.Snapshot
	if len(snap.Listeners) != 1 || snap.Listeners[0].Protocol != "TCP" || snap.Listeners[0].Port != 5432 {
		t.Fatalf("listeners %v", snap.Listeners)
	}
	vh := snap.Listeners[0].Servers[0].VirtualHosts[0]
	if vh.Hostname != "" || len(vh.Routes) != 1 || vh.Routes[0].Name != "StreamRoute/db/pg/rule/0/match/0" {
		t.Errorf("virtual host %v", vh)
	}
	if len(snap.Clusters) != 1 || snap.Clusters[0].Name != "db/pg:5432" || len(snap.Clusters[0].Endpoints) != 1 {
		t.Errorf("clusters %v", snap.Clusters)
	}
}

func TestNoRouteKindsIsAProblem(t *testing.T) {
	res := Translate(context.Background(), &Store{}, Options{Registry: core.NewRegistry()})
	if len(res.Problems) != 1 || res.Problems[0].Reason != "NoRouteKinds" {
		t.Errorf("problems %v", res.Problems)
	}
	if res.Snapshot.Version == "" {
		t.Error("snapshot not sealed")
	}
}
