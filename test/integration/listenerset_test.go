package integration

import (
	"fmt"
	"testing"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/test/integration/env"
)

// TestListenerSet runs ListenerSets against the real API server: a ListenerSet from another
// namespace adds a listener that serves, loses the listener that conflicts with the Gateway's
// own (HostnameConflict, the Gateway first), is counted in the Gateway's attachedListenerSets,
// and its Programmed follows its generation through the data plane's acknowledgement; one from
// a namespace the Gateway does not select is NotAllowed.
func TestListenerSet(t *testing.T) {
	e := env.Start(t)
	startController(t, e, controllerOpts{})
	infra := namespace(t, e, "ls-infra", nil)
	team := namespace(t, e, "ls-team", map[string]string{"ls-test": "yes"})
	outsider := namespace(t, e, "ls-outsider", nil)
	createClass(t, e, "coxswain", "")
	startBackend(t, "ls-backend", "10.99.12.1:8080")
	createService(t, e, team, "app", "10.99.12.1")
	const port = 18790

	shared := httpListener("shared", port)
	shared.Hostname = ptr.To(gwapiv1.Hostname("shared.example.com"))
	gw := &gwapiv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: infra, Name: "gw"},
		Spec: gwapiv1.GatewaySpec{GatewayClassName: "coxswain", Listeners: []gwapiv1.Listener{shared},
			AllowedListeners: &gwapiv1.AllowedListeners{Namespaces: &gwapiv1.ListenerNamespaces{
				From:     ptr.To(gwapiv1.NamespacesFromSelector),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"ls-test": "yes"}},
			}}},
	}
	if _, err := e.Gateway.GatewayV1().Gateways(infra).Create(ctxFor(t), gw, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	entry := func(name, host string) gwapiv1.ListenerEntry {
		return gwapiv1.ListenerEntry{Name: gwapiv1.SectionName(name), Port: port, Protocol: gwapiv1.HTTPProtocolType,
			Hostname: ptr.To(gwapiv1.Hostname(host))}
	}
	createListenerSet(t, e, team, "apps", infra, "gw", entry("app", "app.example.com"), entry("clash", "shared.example.com"))
	createListenerSet(t, e, outsider, "stranger", infra, "gw", entry("other", "other.example.com"))
	lsRef := gwapiv1.ParentReference{Group: ptr.To(gwapiv1.Group(gwapiv1.GroupName)), Kind: ptr.To(gwapiv1.Kind("ListenerSet")),
		Name: "apps", SectionName: ptr.To(gwapiv1.SectionName("app"))}
	createRoute(t, e, httpRoute(team, "app", []gwapiv1.ParentReference{lsRef}, nil, prefixRule("/", backendRef("app", 1))))

	t.Run("a ListenerSet listener conflicting with the Gateway's loses; the other serves", func(t *testing.T) {
		waitListenerSet(t, e, team, "apps", func(ls *gwapiv1.ListenerSet) error {
			if err := checkConds(ls.Status.Conditions, ls.Generation,
				cond{"Accepted", "True", "ListenersNotValid"}, cond{"Programmed", "True", "Programmed"}); err != nil {
				return err
			}
			if err := entryConds(ls, "app", listenerHealthy...); err != nil {
				return err
			}
			if err := entryConds(ls, "clash", cond{"Accepted", "False", "HostnameConflict"},
				cond{"Programmed", "False", "HostnameConflict"}, cond{"Conflicted", "True", "HostnameConflict"}); err != nil {
				return err
			}
			if n := ls.Status.Listeners[0].AttachedRoutes; n != 1 {
				return fmt.Errorf("listener app: attachedRoutes = %d, want 1", n)
			}
			return nil
		})
		waitGateway(t, e, infra, "gw", func(gw *gwapiv1.Gateway) error {
			if n := ptr.Deref(gw.Status.AttachedListenerSets, -1); n != 1 {
				return fmt.Errorf("attachedListenerSets = %d, want 1", n)
			}
			if len(gw.Status.Listeners) != 1 {
				return fmt.Errorf("status.listeners = %v, want the Gateway's own only", gw.Status.Listeners)
			}
			return listenerConds(gw, "shared", listenerHealthy...)
		})
		served(t, port, "app.example.com", "/x", 200, "ls-backend")
		served(t, port, "shared.example.com", "/x", 404, "")
	})

	t.Run("a namespace the Gateway does not select is NotAllowed", func(t *testing.T) {
		waitListenerSet(t, e, outsider, "stranger", func(ls *gwapiv1.ListenerSet) error {
			return checkConds(ls.Status.Conditions, ls.Generation,
				cond{"Accepted", "False", "NotAllowed"}, cond{"Programmed", "False", "NotAllowed"})
		})
		served(t, port, "other.example.com", "/", 404, "")
	})

	t.Run("a new generation is Programmed once the data plane has it", func(t *testing.T) {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			ls, err := e.Gateway.GatewayV1().ListenerSets(team).Get(ctxFor(t), "apps", metav1.GetOptions{})
			if err != nil {
				return err
			}
			ls.Spec.Listeners = ls.Spec.Listeners[:1]
			ls.Spec.Listeners[0].Hostname = ptr.To(gwapiv1.Hostname("app2.example.com"))
			_, err = e.Gateway.GatewayV1().ListenerSets(team).Update(ctxFor(t), ls, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		waitListenerSet(t, e, team, "apps", func(ls *gwapiv1.ListenerSet) error {
			if len(ls.Status.Listeners) != 1 {
				return fmt.Errorf("status.listeners = %d entries, want 1", len(ls.Status.Listeners))
			}
			return checkConds(ls.Status.Conditions, ls.Generation, accepted, programmed)
		})
		// Programmed=True for the new generation means the proxy serves it already.
		r, err := get(port, "app2.example.com", "/y")
		if err != nil || r.backend != "ls-backend" {
			t.Fatalf("right after Programmed: GET app2.example.com = %+v, %v; want ls-backend", r, err)
		}
		served(t, port, "app.example.com", "/x", 404, "")
	})
}

func createListenerSet(t testing.TB, e *env.Env, ns, name, gwNS, gw string, listeners ...gwapiv1.ListenerEntry) {
	t.Helper()
	ls := &gwapiv1.ListenerSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: gwapiv1.ListenerSetSpec{
			ParentRef: gwapiv1.ParentGatewayReference{Name: gwapiv1.ObjectName(gw), Namespace: ptr.To(gwapiv1.Namespace(gwNS))},
			Listeners: listeners,
		},
	}
	if _, err := e.Gateway.GatewayV1().ListenerSets(ns).Create(ctxFor(t), ls, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func waitListenerSet(t testing.TB, e *env.Env, ns, name string, check func(*gwapiv1.ListenerSet) error) {
	t.Helper()
	eventually(t, "ListenerSet "+ns+"/"+name, func() error {
		ls, err := e.Gateway.GatewayV1().ListenerSets(ns).Get(ctxFor(t), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		return check(ls)
	})
}

// entryConds checks the conditions of ListenerSet listener name, stamped for its generation.
func entryConds(ls *gwapiv1.ListenerSet, name string, wants ...cond) error {
	for _, l := range ls.Status.Listeners {
		if string(l.Name) == name {
			if err := checkConds(l.Conditions, ls.Generation, wants...); err != nil {
				return fmt.Errorf("listener %s: %w", name, err)
			}
			return nil
		}
	}
	return fmt.Errorf("no listener %s in status %v", name, ls.Status.Listeners)
}

// TestListenerSetNotServed runs the controller on an API server without the ListenerSet CRD (as
// on Gateway API CRDs before v1.5): it serves Gateways as before and its GatewayClass does
// not claim the ListenerSet feature.
func TestListenerSetNotServed(t *testing.T) {
	e := env.Start(t)
	ext := apiextensionsclient.NewForConfigOrDie(e.Config)
	const crd = "listenersets.gateway.networking.k8s.io"
	if err := ext.ApiextensionsV1().CustomResourceDefinitions().Delete(ctxFor(t), crd, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the ListenerSet resource gone", func() error {
		res, err := e.Kube.Discovery().ServerResourcesForGroupVersion(gwapiv1.GroupVersion.String())
		if err != nil {
			return err
		}
		for _, r := range res.APIResources {
			if r.Name == "listenersets" {
				return fmt.Errorf("still served")
			}
		}
		return nil
	})
	startController(t, e, controllerOpts{})
	ns := namespace(t, e, "ls-none", nil)
	createClass(t, e, "coxswain", "")
	createGateway(t, e, ns, "gw", "coxswain", httpListener("http", 18791))
	waitGateway(t, e, ns, "gw", func(gw *gwapiv1.Gateway) error {
		if gw.Status.AttachedListenerSets != nil {
			return fmt.Errorf("attachedListenerSets = %d, want unset", *gw.Status.AttachedListenerSets)
		}
		return checkConds(gw.Status.Conditions, gw.Generation, accepted, programmed)
	})
	eventually(t, "GatewayClass features", func() error {
		gc, err := e.Gateway.GatewayV1().GatewayClasses().Get(ctxFor(t), "coxswain", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(gc.Status.SupportedFeatures) == 0 {
			return fmt.Errorf("no supportedFeatures yet")
		}
		for _, f := range gc.Status.SupportedFeatures {
			if f.Name == "ListenerSet" {
				return fmt.Errorf("supportedFeatures claims ListenerSet without the resource: %v", gc.Status.SupportedFeatures)
			}
		}
		return nil
	})
}
