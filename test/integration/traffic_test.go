package integration

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/test/integration/env"
)

// TestTraffic drives a Gateway, HTTPRoutes, Services and EndpointSlices through the API server and
// checks what the in-process proxy serves after each change.
func TestTraffic(t *testing.T) {
	e := env.Start(t)
	ctl := startController(t, e, controllerOpts{})
	ns := namespace(t, e, "traffic", nil)
	const port = 18080
	startBackend(t, "a1", "10.99.1.1:8080")
	startBackend(t, "a2", "10.99.1.2:8080")
	startBackend(t, "b1", "10.99.2.1:8080")
	createClass(t, e, "traffic", "")
	createGateway(t, e, ns, "gw", "traffic", httpListener("http", port))
	createService(t, e, ns, "svc-a", "10.99.1.1")
	createService(t, e, ns, "svc-b", "10.99.2.1")
	parents := []gwapiv1.ParentReference{parentRef(ns, "gw")}
	createRoute(t, e, httpRoute(ns, "web", parents, []string{"web.example"}, prefixRule("/a", backendRef("svc-a", 1))))

	served(t, port, "web.example", "/a", 200, "a1")
	served(t, port, "other.example", "/a", 404, "")

	t.Run("new rule", func(t *testing.T) {
		updateRoute(t, e, ns, "web", func(r *gwapiv1.HTTPRoute) {
			r.Spec.Rules = append(r.Spec.Rules, prefixRule("/b", backendRef("svc-b", 1)))
		})
		served(t, port, "web.example", "/b", 200, "b1")
		served(t, port, "web.example", "/a", 200, "a1")
	})

	t.Run("changed weight", func(t *testing.T) {
		createRoute(t, e, httpRoute(ns, "split", parents, []string{"split.example"},
			prefixRule("/", backendRef("svc-a", 1), backendRef("svc-b", 0))))
		allFrom(t, port, "split.example", "/", "a1")
		updateRoute(t, e, ns, "split", func(r *gwapiv1.HTTPRoute) {
			r.Spec.Rules[0].BackendRefs = []gwapiv1.HTTPBackendRef{backendRef("svc-a", 0), backendRef("svc-b", 1)}
		})
		allFrom(t, port, "split.example", "/", "b1")
	})

	t.Run("scaled endpoints", func(t *testing.T) {
		translations := ctl.Stats().Translations.Load()
		setEndpoints(t, e, ns, "svc-a", "10.99.1.1", "10.99.1.2")
		eventually(t, "both endpoints of svc-a serve", func() error {
			seen := map[string]bool{}
			for range 20 {
				r, err := get(port, "web.example", "/a")
				if err != nil {
					return err
				}
				seen[r.backend] = true
			}
			if !seen["a1"] || !seen["a2"] {
				return fmt.Errorf("served by %v", seen)
			}
			return nil
		})
		setEndpoints(t, e, ns, "svc-a", "10.99.1.2")
		allFrom(t, port, "web.example", "/a", "a2")
		if n := ctl.Stats().Translations.Load(); n != translations {
			t.Errorf("EndpointSlice changes ran %d full translations; want the endpoints fast path only", n-translations)
		}
		if ctl.Stats().EndpointRefreshes.Load() == 0 {
			t.Error("the endpoints fast path never ran")
		}
	})

	t.Run("removed route", func(t *testing.T) {
		if err := e.Gateway.GatewayV1().HTTPRoutes(ns).Delete(ctxFor(t), "split", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		served(t, port, "split.example", "/", 404, "")
		served(t, port, "web.example", "/b", 200, "b1")
	})

	t.Run("deleted gateway", func(t *testing.T) {
		if err := e.Gateway.GatewayV1().Gateways(ns).Delete(ctxFor(t), "gw", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		refused(t, port)
	})
}

// allFrom waits until 10 requests in a row to host and path are served by one backend.
func allFrom(t testing.TB, port int, host, path, backend string) {
	t.Helper()
	eventually(t, fmt.Sprintf("every request to %s served by %s", host, backend), func() error {
		for range 10 {
			r, err := get(port, host, path)
			if err != nil {
				return err
			}
			if r.status != 200 || r.backend != backend {
				return fmt.Errorf("got %d from %q", r.status, r.backend)
			}
		}
		return nil
	})
}
