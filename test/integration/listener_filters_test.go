package integration

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/test/integration/env"
)

// TestListenerFilters: a Gateway listener's filters.requests (experimental channel CRDs, which
// keep the field) through the real API server. The listener's IpAccessControl refuses a client
// on every path, routed or not, before routing; others get the route or the 404. A filter naming
// a missing object makes the listener ResolvedRefs=False InvalidListenerFilterRef.
func TestListenerFilters(t *testing.T) {
	e := env.Start(t, env.WithChannel("experimental"))
	startController(t, e, controllerOpts{})
	ns := namespace(t, e, "lf", nil)
	const port = 18296
	startBackend(t, "lf1", "10.99.9.41:8080")
	createClass(t, e, "lf", "")
	if err := coxswainObject(t, e, ipAccessGVR, "IpAccessControl", ns, "acl", map[string]any{"deny": []any{"10.99.9.43"}}); err != nil {
		t.Fatal(err)
	}
	l := httpListener("http", port)
	l.Filters = &gwapiv1.ListenerFilters{Requests: []gwapiv1.ListenerFilter{listenerExtRef("IpAccessControl", "acl")}}
	createGateway(t, e, ns, "gw", "lf", l)
	if gw, err := e.Gateway.GatewayV1().Gateways(ns).Get(ctxFor(t), "gw", metav1.GetOptions{}); err != nil || gw.Spec.Listeners[0].Filters == nil {
		t.Fatalf("the experimental CRD dropped listeners[].filters: %v %+v", err, gw.Spec.Listeners)
	}
	createService(t, e, ns, "svc", "10.99.9.41")
	createRoute(t, e, httpRoute(ns, "web", []gwapiv1.ParentReference{parentRef(ns, "gw")}, []string{"lf.example"},
		prefixRule("/app", backendRef("svc", 1))))

	answers(t, "10.99.9.42", port, "lf.example", "/app/x", 200)
	answers(t, "10.99.9.42", port, "lf.example", "/nowhere", 404)
	answers(t, "10.99.9.43", port, "lf.example", "/app/x", 403)
	answers(t, "10.99.9.43", port, "lf.example", "/nowhere", 403) // before routing

	eventually(t, "a second listener filter, naming a missing object, added", func() error {
		// The status writer updates the Gateway too: re-read until the update wins.
		gw, err := e.Gateway.GatewayV1().Gateways(ns).Get(ctxFor(t), "gw", metav1.GetOptions{})
		if err != nil {
			return err
		}
		gw.Spec.Listeners[0].Filters.Requests = append(gw.Spec.Listeners[0].Filters.Requests, listenerExtRef("IpAccessControl", "missing"))
		_, err = e.Gateway.GatewayV1().Gateways(ns).Update(ctxFor(t), gw, metav1.UpdateOptions{})
		return err
	})
	eventually(t, "listener ResolvedRefs=False InvalidListenerFilterRef", func() error {
		g, err := e.Gateway.GatewayV1().Gateways(ns).Get(ctxFor(t), "gw", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, ls := range g.Status.Listeners {
			for _, c := range ls.Conditions {
				if c.Type == string(gwapiv1.ListenerConditionResolvedRefs) && c.ObservedGeneration == g.Generation {
					if c.Status != metav1.ConditionFalse || c.Reason != "InvalidListenerFilterRef" || !strings.Contains(c.Message, "filters.requests[1]") {
						return fmt.Errorf("ResolvedRefs %+v", c)
					}
					return nil
				}
			}
		}
		return fmt.Errorf("listener status %+v", g.Status.Listeners)
	})
}

func listenerExtRef(kind, name string) gwapiv1.ListenerFilter {
	return gwapiv1.ListenerFilter{Type: gwapiv1.ListenerFilterExtensionRef, ExtensionRef: &gwapiv1.LocalObjectReference{
		Group: "gateway.coxswain-labs.dev", Kind: gwapiv1.Kind(kind), Name: gwapiv1.ObjectName(name)}}
}
