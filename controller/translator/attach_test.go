package translator

import (
	"testing"
	"time"

	"github.com/coxswain-labs/coxswain/modules/translation"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func TestNamespaceAllowed(t *testing.T) {
	from := func(f gwapiv1.FromNamespaces) *gwapiv1.FromNamespaces { return &f }
	t1 := &session{store: &Store{Namespaces: []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{"team": "a"}}},
	}}}
	t1.index()
	cases := []struct {
		name    string
		allowed *gwapiv1.AllowedRoutes
		routeNS string
		want    bool
	}{
		{"spec: default is Same (same namespace)", nil, "infra", true},
		{"spec: default is Same (other namespace)", nil, "team-a", false},
		{"spec: From All", &gwapiv1.AllowedRoutes{Namespaces: &gwapiv1.RouteNamespaces{From: from(gwapiv1.NamespacesFromAll)}}, "team-a", true},
		{"spec: From None", &gwapiv1.AllowedRoutes{Namespaces: &gwapiv1.RouteNamespaces{From: from(gwapiv1.NamespacesFromNone)}}, "infra", false},
		{"spec: namespaces without from is Same", &gwapiv1.AllowedRoutes{Namespaces: &gwapiv1.RouteNamespaces{}}, "team-a", false},
		{"spec: Selector matches namespace labels", &gwapiv1.AllowedRoutes{Namespaces: &gwapiv1.RouteNamespaces{
			From: from(gwapiv1.NamespacesFromSelector), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}}}, "team-a", true},
		{"spec: Selector rejects others", &gwapiv1.AllowedRoutes{Namespaces: &gwapiv1.RouteNamespaces{
			From: from(gwapiv1.NamespacesFromSelector), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}}}, "team-b", false},
		{"a namespace missing from the store still has its name label", &gwapiv1.AllowedRoutes{Namespaces: &gwapiv1.RouteNamespaces{
			From: from(gwapiv1.NamespacesFromSelector), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "ghost"}}}}, "ghost", true},
		{"Selector with expressions", &gwapiv1.AllowedRoutes{Namespaces: &gwapiv1.RouteNamespaces{
			From: from(gwapiv1.NamespacesFromSelector), Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "team", Operator: metav1.LabelSelectorOpExists}}}}}, "team-a", true},
		{"Selector without a selector admits nothing", &gwapiv1.AllowedRoutes{Namespaces: &gwapiv1.RouteNamespaces{From: from(gwapiv1.NamespacesFromSelector)}}, "team-a", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := &listenerState{gw: &gatewayState{key: nn("infra", "gw")}, spec: &gwapiv1.Listener{AllowedRoutes: c.allowed}}
			if got := t1.namespaceAllowed(l, c.routeNS); got != c.want {
				t.Errorf("namespaceAllowed = %v, want %v", got, c.want)
			}
		})
	}
}

func TestPlacedOrderTieBreaks(t *testing.T) {
	at := func(s string) metav1.Time {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			panic(err)
		}
		return metav1.NewTime(tm)
	}
	route := func(ns, name, created string) *routeState {
		m := &gwapiv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: at(created)}}
		return &routeState{meta: m, key: RouteKey{Kind: "HTTPRoute", Namespace: ns, Name: name}}
	}
	old := route("z", "old", "2023-01-01T00:00:00Z")
	youngA := route("a", "young", "2023-06-01T00:00:00Z")
	youngB := route("b", "young", "2023-06-01T00:00:00Z")
	p := func(r *routeState, rule, match int, prec ...int) *placed {
		return &placed{route: r, entry: &translation.Entry{Rule: rule, Match: match, Precedence: prec}}
	}
	cases := []struct {
		name   string
		first  *placed
		second *placed
	}{
		{"precedence first, even against an older route", p(youngA, 0, 0, 2), p(old, 0, 0, 1)},
		{"precedence is element-wise", p(youngA, 0, 0, 1, 5), p(old, 0, 0, 1, 4)},
		{"a missing element counts as 0", p(youngA, 0, 0, 1, 1), p(old, 0, 0, 1)},
		{"spec: the oldest route wins a tie", p(old, 3, 3, 1), p(youngA, 0, 0, 1)},
		{"spec: then namespace/name alphabetical", p(youngA, 3, 3, 1), p(youngB, 0, 0, 1)},
		{"spec: then the first rule", p(youngA, 0, 5, 1), p(youngA, 1, 0, 1)},
		{"then the first match", p(youngA, 1, 0, 1), p(youngA, 1, 1, 1)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !placedLess(c.first, c.second) || placedLess(c.second, c.first) {
				t.Errorf("want first before second")
			}
		})
	}
}
