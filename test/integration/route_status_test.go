package integration

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapiv1b1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/coxswain-labs/coxswain/test/integration/env"
)

const otherController = "example.com/other-controller"

// TestRouteStatus reads back every HTTPRoute condition and reason the controller writes, checks
// other controllers' entries and objects are left alone, and that status is written only when it
// changes.
func TestRouteStatus(t *testing.T) {
	e := env.Start(t)
	ctl := startController(t, e, controllerOpts{})
	ns := namespace(t, e, "routes", nil)
	other := namespace(t, e, "routes-other", nil)
	createClass(t, e, "coxswain", "")
	startBackend(t, "ok", "10.99.4.1:8080")
	createService(t, e, ns, "svc", "10.99.4.1")
	createService(t, e, other, "foreign", "10.99.4.1")
	const port = 18200
	same := httpListener("same", port) // allowedRoutes defaults to the Gateway's namespace
	host := httpListener("host", port+1)
	host.Hostname = ptr.To(gwapiv1.Hostname("a.example"))
	all := httpListener("all", port+2)
	all.AllowedRoutes = &gwapiv1.AllowedRoutes{Namespaces: &gwapiv1.RouteNamespaces{From: ptr.To(gwapiv1.NamespacesFromAll)}}
	createGateway(t, e, ns, "gw", "coxswain", same, host, all)
	section := func(s string) []gwapiv1.ParentReference {
		p := parentRef(ns, "gw")
		p.SectionName = ptr.To(gwapiv1.SectionName(s))
		return []gwapiv1.ParentReference{p}
	}
	svcRule := prefixRule("/", backendRef("svc", 1))

	t.Run("Accepted reasons", func(t *testing.T) {
		tests := []struct {
			name, ns, section string
			hostnames         []string
			rule              gwapiv1.HTTPRouteRule
			want              cond
		}{
			{name: "accepted", ns: ns, section: "all", rule: svcRule, want: accepted},
			{name: "not-allowed", ns: other, section: "same", rule: svcRule, want: cond{"Accepted", "False", "NotAllowedByListeners"}},
			{name: "no-hostname", ns: ns, section: "host", hostnames: []string{"b.example"}, rule: svcRule,
				want: cond{"Accepted", "False", "NoMatchingListenerHostname"}},
			{name: "no-parent", ns: ns, section: "nope", rule: svcRule, want: cond{"Accepted", "False", "NoMatchingParent"}},
			{name: "bad-regex", ns: ns, section: "all", rule: gwapiv1.HTTPRouteRule{
				Matches:     []gwapiv1.HTTPRouteMatch{{Path: &gwapiv1.HTTPPathMatch{Type: ptr.To(gwapiv1.PathMatchRegularExpression), Value: ptr.To("/([a-z")}}},
				BackendRefs: []gwapiv1.HTTPBackendRef{backendRef("svc", 1)},
			}, want: cond{"Accepted", "False", "UnsupportedValue"}},
		}
		for _, tc := range tests {
			createRoute(t, e, httpRoute(tc.ns, tc.name, section(tc.section), tc.hostnames, tc.rule))
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				waitRouteParent(t, e, tc.ns, tc.name, "", tc.section, tc.want)
			})
		}
	})

	t.Run("ResolvedRefs reasons", func(t *testing.T) {
		ref := func(name, ns, kind string) gwapiv1.HTTPBackendRef {
			r := backendRef(name, 1)
			if ns != "" {
				r.Namespace = ptr.To(gwapiv1.Namespace(ns))
			}
			if kind != "" {
				r.Kind = ptr.To(gwapiv1.Kind(kind))
			}
			return r
		}
		tests := []struct {
			name    string
			backend gwapiv1.HTTPBackendRef
			want    string
		}{
			{"missing-service", ref("nope", "", ""), "BackendNotFound"},
			{"invalid-kind", ref("svc", "", "ConfigMap"), "InvalidKind"},
			{"not-permitted", ref("foreign", other, ""), "RefNotPermitted"},
		}
		for _, tc := range tests {
			createRoute(t, e, httpRoute(ns, tc.name, section("all"), nil, prefixRule("/", tc.backend)))
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				waitRouteParent(t, e, ns, tc.name, "", "all", accepted, cond{"ResolvedRefs", "False", tc.want})
			})
		}
		t.Run("granted", func(t *testing.T) {
			_, err := e.Gateway.GatewayV1beta1().ReferenceGrants(other).Create(ctxFor(t), &gwapiv1b1.ReferenceGrant{
				ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "routes-to-services"},
				Spec: gwapiv1b1.ReferenceGrantSpec{
					From: []gwapiv1b1.ReferenceGrantFrom{{Group: gwapiv1.GroupName, Kind: "HTTPRoute", Namespace: gwapiv1.Namespace(ns)}},
					To:   []gwapiv1b1.ReferenceGrantTo{{Group: "", Kind: "Service"}},
				},
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			waitRouteParent(t, e, ns, "not-permitted", "", "all", accepted, resolved)
		})
	})

	t.Run("allowedRoutes namespace selector follows namespace labels", func(t *testing.T) {
		sel := httpListener("selected", port+4)
		sel.AllowedRoutes = &gwapiv1.AllowedRoutes{Namespaces: &gwapiv1.RouteNamespaces{
			From:     ptr.To(gwapiv1.NamespacesFromSelector),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}},
		}}
		createGateway(t, e, ns, "selector", "coxswain", sel)
		team := namespace(t, e, "team", nil)
		createRoute(t, e, httpRoute(team, "team-route", []gwapiv1.ParentReference{parentRef(ns, "selector")}, nil, svcRule))
		waitRouteParent(t, e, team, "team-route", "", "", cond{"Accepted", "False", "NotAllowedByListeners"})
		nsObj, err := e.Kube.CoreV1().Namespaces().Get(ctxFor(t), team, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		nsObj.Labels["team"] = "a"
		if _, err := e.Kube.CoreV1().Namespaces().Update(ctxFor(t), nsObj, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitRouteParent(t, e, team, "team-route", "", "", accepted)
	})

	t.Run("missing Service answers 500 for its rule only", func(t *testing.T) {
		createRoute(t, e, httpRoute(ns, "partial", section("all"), []string{"partial.example"},
			prefixRule("/ok", backendRef("svc", 1)), prefixRule("/missing", backendRef("nope", 1))))
		waitRouteParent(t, e, ns, "partial", "", "all", accepted, cond{"ResolvedRefs", "False", "BackendNotFound"})
		served(t, port+2, "partial.example", "/missing", 500, "")
		served(t, port+2, "partial.example", "/ok", 200, "ok")
		served(t, port+2, "anything.example", "/", 200, "ok") // the "accepted" route, no hostnames
	})

	t.Run("observedGeneration follows the spec", func(t *testing.T) {
		r := updateRoute(t, e, ns, "accepted", func(r *gwapiv1.HTTPRoute) {
			r.Spec.Rules = append(r.Spec.Rules, prefixRule("/second", backendRef("svc", 1)))
		})
		if r.Generation < 2 {
			t.Fatalf("generation %d after a spec change", r.Generation)
		}
		waitRouteParent(t, e, ns, "accepted", "", "all", accepted, resolved) // checks observedGeneration == generation
	})

	// Another implementation's GatewayClass, Gateway and route parent entry.
	createClass(t, e, "theirs", otherController)
	createGateway(t, e, ns, "theirs", "theirs", httpListener("http", port+3))
	shared := createRoute(t, e, httpRoute(ns, "shared", []gwapiv1.ParentReference{parentRef(ns, "gw"), parentRef(ns, "theirs")}, nil, svcRule))

	t.Run("other controllers' route entries are preserved", func(t *testing.T) {
		theirEntry := func(msg string) gwapiv1.RouteParentStatus {
			return gwapiv1.RouteParentStatus{ParentRef: parentRef(ns, "theirs"), ControllerName: otherController,
				Conditions: []metav1.Condition{{Type: "Accepted", Status: "True", Reason: "Accepted", Message: msg,
					ObservedGeneration: shared.Generation, LastTransitionTime: metav1.NewTime(time.Now().Truncate(time.Second))}}}
		}
		writeTheirs := func(msg string) {
			eventually(t, "their status write", func() error {
				r, err := e.Gateway.GatewayV1().HTTPRoutes(ns).Get(ctxFor(t), "shared", metav1.GetOptions{})
				if err != nil {
					return err
				}
				var parents []gwapiv1.RouteParentStatus
				for _, p := range r.Status.Parents {
					if p.ControllerName != otherController {
						parents = append(parents, p)
					}
				}
				r.Status.Parents = append(parents, theirEntry(msg))
				_, err = e.Gateway.GatewayV1().HTTPRoutes(ns).UpdateStatus(ctxFor(t), r, metav1.UpdateOptions{})
				return err
			})
		}
		writeTheirs("theirs, first")
		waitRouteParent(t, e, ns, "shared", "", "", accepted, resolved)
		writeTheirs("theirs, second")
		// Ours survives their write, and theirs survives ours.
		waitRouteParent(t, e, ns, "shared", "", "", accepted, resolved)
		r := waitRouteParent(t, e, ns, "shared", otherController, "", accepted)
		for _, p := range r.Status.Parents {
			if p.ControllerName == otherController && p.Conditions[0].Message != "theirs, second" {
				t.Errorf("their entry was changed: %+v", p)
			}
		}
		if len(r.Status.Parents) != 2 {
			t.Errorf("parents = %+v, want one of theirs and one of ours", r.Status.Parents)
		}
	})

	t.Run("other controllers' objects are left alone", func(t *testing.T) {
		gc, err := e.Gateway.GatewayV1().GatewayClasses().Get(ctxFor(t), "theirs", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if c := meta.FindStatusCondition(gc.Status.Conditions, "Accepted"); c == nil || c.Reason != "Pending" || len(gc.Status.SupportedFeatures) > 0 {
			t.Errorf("their GatewayClass status was written: %+v", gc.Status)
		}
		gw, err := e.Gateway.GatewayV1().Gateways(ns).Get(ctxFor(t), "theirs", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if c := meta.FindStatusCondition(gw.Status.Conditions, "Accepted"); c == nil || c.Reason != "Pending" || len(gw.Status.Addresses) > 0 {
			t.Errorf("their Gateway status was written: %+v", gw.Status)
		}
		refused(t, port+3) // and nothing serves their Gateway's listener
	})

	t.Run("status is written only when it changes", func(t *testing.T) {
		routes := e.Gateway.GatewayV1().HTTPRoutes(ns)
		before := map[string]string{}
		list, err := routes.List(ctxFor(t), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range list.Items {
			before[r.Name] = r.ResourceVersion
		}
		writes, translations := ctl.StatusWrites(), ctl.Stats().Translations.Load()
		// An unrelated change translates everything again, and changes no status.
		createService(t, e, ns, "unrelated", "10.99.4.2")
		eventually(t, "a translation", func() error {
			if ctl.Stats().Translations.Load() == translations {
				return fmt.Errorf("no translation yet")
			}
			return nil
		})
		// A marker change that does change one status; once it is written, the writer has been
		// through everything queued before it.
		updateRoute(t, e, ns, "no-parent", func(r *gwapiv1.HTTPRoute) { r.Spec.Rules[0].BackendRefs[0].Port = ptr.To(gwapiv1.PortNumber(81)) })
		waitRouteParent(t, e, ns, "no-parent", "", "nope", cond{"Accepted", "False", "NoMatchingParent"})
		// The writer counts a write after the API server has answered it, so the count may trail
		// the status the API server already shows by a moment.
		eventually(t, "the marker's status write counted", func() error {
			if ctl.StatusWrites() == writes {
				return fmt.Errorf("no status write counted yet")
			}
			return nil
		})
		if got := ctl.StatusWrites() - writes; got != 1 {
			t.Errorf("%d status writes, want 1 (the marker's)", got)
		}
		list, err = routes.List(ctxFor(t), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range list.Items {
			if r.Name != "no-parent" && before[r.Name] != r.ResourceVersion {
				t.Errorf("HTTPRoute %s was written (resourceVersion %s → %s)", r.Name, before[r.Name], r.ResourceVersion)
			}
		}
	})
}
