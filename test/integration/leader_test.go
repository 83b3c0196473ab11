package integration

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/test/integration/env"
)

// TestLeaderFailover runs two `coxswain controller` processes on one Lease. Killing the leader
// (SIGKILL: no chance to release the Lease) hands leadership, traffic and status to the standby
// once the Lease expires; stopping it cleanly (SIGTERM) releases the Lease for an immediate
// hand-over. Programmed never flips back on the way.
func TestLeaderFailover(t *testing.T) {
	e := env.Start(t)
	const lease, leaseDuration, port = "failover", 4 * time.Second, 18300
	electionFlags := func(id string) []string {
		return []string{"--leader-election-namespace", "default", "--leader-election-id", lease,
			"--leader-election-identity", id, "--lease-duration", leaseDuration.String(),
			"--renew-deadline", "3s", "--retry-period", "500ms"}
	}
	procs := map[string]*process{
		"a": startProcess(t, e, "a", electionFlags("a")...),
		"b": startProcess(t, e, "b", electionFlags("b")...),
	}
	ns := namespace(t, e, "failover", nil)
	startBackend(t, "be", "10.99.5.1:8080")
	createService(t, e, ns, "svc", "10.99.5.1")
	createClass(t, e, "coxswain", "")
	events := watchGateways(t, e, ns)
	createGateway(t, e, ns, "gw", "coxswain", httpListener("http", port))
	createRoute(t, e, httpRoute(ns, "one", []gwapiv1.ParentReference{parentRef(ns, "gw")}, []string{"one.example"},
		prefixRule("/", backendRef("svc", 1))))
	served(t, port, "one.example", "/", 200, "be")
	gw := waitGateway(t, e, ns, "gw", func(gw *gwapiv1.Gateway) error { return checkConds(gw.Status.Conditions, gw.Generation, programmed) })

	leader := holder(t, e, lease, "")
	standby := map[string]string{"a": "b", "b": "a"}[leader]
	t.Logf("leader %s, standby %s", leader, standby)

	t.Run("killed leader", func(t *testing.T) {
		killed := time.Now()
		procs[leader].signal(syscall.SIGKILL)
		procs[leader].wait(t)
		holder(t, e, lease, standby)
		t.Logf("standby took the Lease %s after the leader was killed (lease duration %s)",
			time.Since(killed).Round(time.Millisecond), leaseDuration)
		served(t, port, "one.example", "/", 200, "be")
		t.Logf("traffic served again %s after the kill", time.Since(killed).Round(time.Millisecond))

		// Status stays current under the new leader: a new route and a spec change.
		createRoute(t, e, httpRoute(ns, "two", []gwapiv1.ParentReference{parentRef(ns, "gw")}, []string{"two.example"},
			prefixRule("/", backendRef("svc", 1))))
		waitRouteParent(t, e, ns, "two", "", "", accepted, resolved)
		served(t, port, "two.example", "/", 200, "be")
		updateRoute(t, e, ns, "one", func(r *gwapiv1.HTTPRoute) { r.Spec.Hostnames = append(r.Spec.Hostnames, "uno.example") })
		waitRouteParent(t, e, ns, "one", "", "", accepted, resolved)
		served(t, port, "uno.example", "/", 200, "be")
	})

	t.Run("stopped leader", func(t *testing.T) {
		old, next := standby, leader
		procs[next] = startProcess(t, e, next+"-restarted", electionFlags(next)...)
		stopped := time.Now()
		procs[old].signal(syscall.SIGTERM)
		procs[old].wait(t)
		holder(t, e, lease, next)
		t.Logf("standby took the released Lease %s after SIGTERM", time.Since(stopped).Round(time.Millisecond))
		served(t, port, "two.example", "/", 200, "be")
		createRoute(t, e, httpRoute(ns, "three", []gwapiv1.ParentReference{parentRef(ns, "gw")}, []string{"three.example"},
			prefixRule("/", backendRef("svc", 1))))
		waitRouteParent(t, e, ns, "three", "", "", accepted, resolved)
		served(t, port, "three.example", "/", 200, "be")
	})

	t.Run("Programmed never flipped back", func(t *testing.T) {
		cur, err := e.Gateway.GatewayV1().Gateways(ns).Get(ctxFor(t), "gw", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		seenTrue := false
		for _, v := range events.upTo(cur.ResourceVersion) {
			c := meta.FindStatusCondition(v.Status.Conditions, "Programmed")
			isTrue := c != nil && c.Status == metav1.ConditionTrue
			if seenTrue && !isTrue && v.Generation == gw.Generation {
				t.Errorf("resourceVersion %s: Programmed went back to %+v", v.ResourceVersion, c)
			}
			seenTrue = seenTrue || isTrue
		}
	})
}

// holder waits until the Lease has a holder (want, when set) and returns it.
func holder(t testing.TB, e *env.Env, lease, want string) string {
	t.Helper()
	var got string
	eventually(t, fmt.Sprintf("Lease %s held by %q", lease, want), func() error {
		l, err := e.Kube.CoordinationV1().Leases("default").Get(ctxFor(t), lease, metav1.GetOptions{})
		if err != nil {
			return err
		}
		got = ptr.Deref(l.Spec.HolderIdentity, "")
		if got == "" || (want != "" && got != want) {
			return fmt.Errorf("held by %q", got)
		}
		return nil
	})
	return got
}

// TestStandbyIsPassive: of two controllers on one Lease, only the leader publishes and writes
// status; the standby serves nothing and writes nothing.
func TestStandbyIsPassive(t *testing.T) {
	e := env.Start(t)
	a := startController(t, e, controllerOpts{lease: "passive", identity: "a"})
	b := startController(t, e, controllerOpts{lease: "passive", identity: "b"})
	id := holder(t, e, "passive", "")
	leader, standby := a, b
	if id == "b" {
		leader, standby = b, a
	}
	ns := namespace(t, e, "passive", nil)
	startBackend(t, "be", "10.99.9.1:8080")
	createService(t, e, ns, "svc", "10.99.9.1")
	createClass(t, e, "coxswain", "")
	createGateway(t, e, ns, "gw", "coxswain", httpListener("http", 18600))
	createRoute(t, e, httpRoute(ns, "r", []gwapiv1.ParentReference{parentRef(ns, "gw")}, nil, prefixRule("/", backendRef("svc", 1))))
	waitRouteParent(t, e, ns, "r", "", "", accepted, resolved)
	served(t, 18600, "any.example", "/", 200, "be")
	if !leader.Stats().Leading.Load() || leader.Stats().Publishes.Load() == 0 || leader.StatusWrites() == 0 {
		t.Errorf("leader %s: leading=%v publishes=%d status writes=%d", id, leader.Stats().Leading.Load(),
			leader.Stats().Publishes.Load(), leader.StatusWrites())
	}
	st := standby.Stats()
	if st.Leading.Load() || st.Publishes.Load() != 0 || st.Translations.Load() != 0 || standby.StatusWrites() != 0 {
		t.Errorf("standby: leading=%v publishes=%d translations=%d status writes=%d", st.Leading.Load(),
			st.Publishes.Load(), st.Translations.Load(), standby.StatusWrites())
	}
}
