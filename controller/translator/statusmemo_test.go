package translator_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/core"
)

// TestReusedStatusFollowsOtherRoutes: a route whose own records are all replayed still gets a
// new status when another route changes what it is served as. An HTTPRoute is served alone;
// then an older GRPCRoute with the same hostname arrives on its listener and takes it
// (HostnameConflict); then it leaves again. After each step the incremental statuses equal a
// full translation's (but for the time of reused conditions), and the HTTPRoute's status is
// reused while nothing changed, even when the clock moved on, and only then.
func TestReusedStatusFollowsOtherRoutes(t *testing.T) {
	reg := core.Freeze()
	now := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	opts := translator.Options{Registry: reg, Now: func() metav1.Time { return now }}
	at := func(sec int64) metav1.Time { return metav1.NewTime(time.Unix(sec, 0)) }
	class := &gwapiv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "coxswain", Generation: 1},
		Spec: gwapiv1.GatewayClassSpec{ControllerName: translator.DefaultControllerName}}
	gw := &gwapiv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gw", Generation: 1, UID: "gw"},
		Spec: gwapiv1.GatewaySpec{GatewayClassName: "coxswain", Listeners: []gwapiv1.Listener{
			{Name: "http", Port: 8080, Protocol: gwapiv1.HTTPProtocolType}}}}
	parents := []gwapiv1.ParentReference{{Name: "gw"}}
	httpRoute := &gwapiv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", Generation: 1, UID: "web",
		CreationTimestamp: at(200)}, Spec: gwapiv1.HTTPRouteSpec{
		CommonRouteSpec: gwapiv1.CommonRouteSpec{ParentRefs: parents}, Hostnames: []gwapiv1.Hostname{"a.example.com"},
		Rules: []gwapiv1.HTTPRouteRule{{}}}}
	grpcRoute := &gwapiv1.GRPCRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "rpc", Generation: 1, UID: "rpc",
		CreationTimestamp: at(100)}, Spec: gwapiv1.GRPCRouteSpec{
		CommonRouteSpec: gwapiv1.CommonRouteSpec{ParentRefs: parents}, Hostnames: []gwapiv1.Hostname{"a.example.com"},
		Rules: []gwapiv1.GRPCRouteRule{{}}}}
	store := func(withGRPC bool) *translator.Store {
		s := &translator.Store{GatewayClasses: []*gwapiv1.GatewayClass{class}, Gateways: []*gwapiv1.Gateway{gw}}
		s.Add(schema.GroupKind{Group: gwapiv1.GroupName, Kind: "HTTPRoute"}, httpRoute)
		if withGRPC {
			s.Add(schema.GroupKind{Group: gwapiv1.GroupName, Kind: "GRPCRoute"}, grpcRoute)
		}
		return s
	}
	key := translator.RouteKey{Group: gwapiv1.GroupName, Kind: "HTTPRoute", Namespace: "ns", Name: "web"}
	inc := translator.NewIncremental()
	var prev *gwapiv1.RouteStatus
	for i, step := range []struct {
		withGRPC, accepted, reused, tick bool
	}{
		{false, true, false, false}, {false, true, true, false}, {false, true, true, true}, {true, false, false, true},
		{true, false, true, false}, {false, true, false, true},
	} {
		if step.tick { // a second later: a status that did not change is still reused, time and all
			now = metav1.NewTime(now.Add(time.Second))
		}
		s := store(step.withGRPC)
		got := inc.Translate(context.Background(), s, opts)
		want := translator.Translate(context.Background(), s, opts)
		if msg := diffResults(got, want); msg != "" {
			t.Fatalf("step %d: incremental differs from full: %s", i, msg)
		}
		rs := got.Routes.Get(key)
		if rs == nil || len(rs.Parents) != 1 {
			t.Fatalf("step %d: HTTPRoute status %+v", i, rs)
		}
		accepted := metaTrue(rs.Parents[0].Conditions, string(gwapiv1.RouteConditionAccepted))
		if accepted != step.accepted {
			t.Errorf("step %d: HTTPRoute Accepted=%t, want %t (%+v)", i, accepted, step.accepted, rs.Parents[0].Conditions)
		}
		if reused := rs == prev; reused != step.reused {
			t.Errorf("step %d: status reused %t, want %t", i, reused, step.reused)
		}
		if at := rs.Parents[0].Conditions[0].LastTransitionTime; !step.reused && !at.Equal(&now) {
			t.Errorf("step %d: a new status stamped %v, want the translation's time %v", i, at, now)
		}
		prev = rs
	}
}

func metaTrue(conds []metav1.Condition, typ string) bool {
	for _, c := range conds {
		if c.Type == typ {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}
