package integration

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/test/integration/env"
)

// TestIncrementalTranslation: against the real API server, a new route after 50 others is
// translated by replaying the others' builds, not running them again: the controller's own
// status writes (of the routes, of the Gateway's attachedRoutes) must not look like changes of
// the world a route is built in.
func TestIncrementalTranslation(t *testing.T) {
	e := env.Start(t)
	ns := namespace(t, e, "incr", nil)
	startBackend(t, "incr", "10.99.9.1:8080")
	createService(t, e, ns, "svc", "10.99.9.1")
	createClass(t, e, "coxswain", "")
	createGateway(t, e, ns, "gw", "coxswain", httpListener("http", 18700))
	createManyRoutes(t, e, ns, 50)
	c := startController(t, e, controllerOpts{})
	waitAllCurrent(t, e, ns, 50, waitFor)
	served(t, 18700, "pre-49.bench", "/", 200, "incr")

	st := c.Stats()
	replayed, built := st.ReplayedBuilds.Load(), st.Builds.Load()
	parents := []gwapiv1.ParentReference{parentRef(ns, "gw")}
	createRoute(t, e, httpRoute(ns, "new", parents, []string{"new.bench"}, prefixRule("/", backendRef("svc", 1))))
	served(t, 18700, "new.bench", "/", 200, "incr")
	waitRouteParent(t, e, ns, "new", "", "", accepted, resolved)
	// The status writes the new route caused have been translated too by now; look at all of it.
	dReplayed, dBuilt := st.ReplayedBuilds.Load()-replayed, st.Builds.Load()-built
	t.Logf("since the 51st route: %d builds replayed, %d run", dReplayed, dBuilt)
	if dReplayed < 50 {
		t.Errorf("%d builds replayed for a new route among 50 (%d run): the other routes were translated again", dReplayed, dBuilt)
	}
	if dBuilt > 2*2+int64(dReplayed)/10 {
		t.Errorf("%d builds run for one new route (%d replayed)", dBuilt, dReplayed)
	}
	if st.ChangesUsed.Load() == 0 {
		t.Errorf("no translation used the changed routes' keys: every Store was listed afresh")
	}

	// An update and a delete go through the patched Store too: the route moves to another
	// hostname, then goes, and the others stay served.
	used := st.ChangesUsed.Load()
	updateRoute(t, e, ns, "new", func(r *gwapiv1.HTTPRoute) { r.Spec.Hostnames = []gwapiv1.Hostname{"moved.bench"} })
	served(t, 18700, "moved.bench", "/", 200, "incr")
	served(t, 18700, "new.bench", "/", 404, "")
	if err := e.Gateway.GatewayV1().HTTPRoutes(ns).Delete(ctxFor(t), "new", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	served(t, 18700, "moved.bench", "/", 404, "")
	served(t, 18700, "pre-49.bench", "/", 200, "incr")
	if st.ChangesUsed.Load() < used+2 {
		t.Errorf("%d translations used the changes for an update and a delete, want 2 or more", st.ChangesUsed.Load()-used)
	}
}
