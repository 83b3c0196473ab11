package integration

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller/status"
	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/test/integration/env"
)

// TestStatusUnderChurn updates 1,000 HTTPRoutes continuously for 60 s (10 s with -short;
// COXSWAIN_CHURN_SECONDS overrides) against the real API server and checks that afterwards
// every route's status is that of its latest generation (0 stale), within the usual wait. It
// counts the status writes from the controller's own counter (status.APICounters, behind
// coxswain_controller_status_writes_total): the writer coalesces the changes an object gets
// while it is queued, so there are never more writes than spec changes, and the client's rate
// limit bounds the write rate whatever the churn.
func TestStatusUnderChurn(t *testing.T) {
	const routes = 1000
	churn := 60 * time.Second
	if testing.Short() {
		churn = 10 * time.Second
	}
	if s := os.Getenv("COXSWAIN_CHURN_SECONDS"); s != "" {
		d, err := time.ParseDuration(s + "s")
		if err != nil {
			t.Fatalf("COXSWAIN_CHURN_SECONDS: %v", err)
		}
		churn = d
	}
	e := env.Start(t)
	ns := namespace(t, e, "churn", nil)
	createService(t, e, ns, "svc", "10.99.7.1")
	createClass(t, e, "coxswain", "")
	createGateway(t, e, ns, "gw", "coxswain", httpListener("http", 18600))
	createManyRoutes(t, e, ns, routes)

	startController(t, e, controllerOpts{})
	waitAllCurrent(t, e, ns, routes, waitFor*4)

	writesBefore := status.APICounters.Writes.Load()
	var updates atomic.Int64
	stop := time.Now().Add(churn)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; time.Now().Before(stop); i += 8 {
				name := fmt.Sprintf("pre-%d", i%routes)
				err := bumpRoute(t, e, ns, name, i)
				if err != nil {
					t.Errorf("updating %s: %v", name, err)
					return
				}
				updates.Add(1)
			}
		})
	}
	wg.Wait()
	start := time.Now()
	stale := waitAllCurrent(t, e, ns, routes, waitFor)
	settled := time.Since(start)
	writes := status.APICounters.Writes.Load() - writesBefore
	t.Logf("%d spec updates of %d routes in %s; %d status writes; all current %s after the churn stopped (%d stale at the last look before)",
		updates.Load(), routes, churn, writes, settled.Round(time.Millisecond), stale)
	if writes > updates.Load() {
		t.Errorf("%d status writes for %d spec updates: the writer wrote some object more often than it changed", writes, updates.Load())
	}
	if writes == 0 {
		t.Errorf("no status write during the churn: the counter does not count")
	}
}

// createManyRoutes creates n HTTPRoutes pre-<i> (own hostname, one rule to svc) concurrently.
func createManyRoutes(t testing.TB, e *env.Env, ns string, n int) {
	t.Helper()
	parents := []gwapiv1.ParentReference{parentRef(ns, "gw")}
	var wg sync.WaitGroup
	work := make(chan int)
	var failed atomic.Value
	for range 16 {
		wg.Go(func() {
			for i := range work {
				r := httpRoute(ns, fmt.Sprintf("pre-%d", i), parents, []string{fmt.Sprintf("pre-%d.bench", i)}, prefixRule("/", backendRef("svc", 1)))
				if _, err := e.Gateway.GatewayV1().HTTPRoutes(ns).Create(ctxFor(t), r, metav1.CreateOptions{}); err != nil {
					failed.Store(err)
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		t.Fatal(err)
	}
}

// bumpRoute changes a route's spec (its rule's path), so its generation grows.
func bumpRoute(t testing.TB, e *env.Env, ns, name string, n int) error {
	for {
		r, err := e.Gateway.GatewayV1().HTTPRoutes(ns).Get(ctxFor(t), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		path := fmt.Sprintf("/v%d", n)
		r.Spec.Rules[0].Matches[0].Path.Value = &path
		_, err = e.Gateway.GatewayV1().HTTPRoutes(ns).Update(ctxFor(t), r, metav1.UpdateOptions{})
		if !apierrors.IsConflict(err) {
			return err
		}
	}
}

// waitAllCurrent polls the routes pre-0 … pre-<n-1> until each has our parent status Accepted
// with every condition at the route's generation; it returns how many were stale at the look
// before the last, and fails the test when some still are after timeout.
func waitAllCurrent(t testing.TB, e *env.Env, ns string, n int, timeout time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(timeout)
	lastStale := -1
	for {
		list, err := e.Gateway.GatewayV1().HTTPRoutes(ns).List(ctxFor(t), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		stale, example := 0, ""
		for i := range list.Items {
			r := &list.Items[i]
			if !statusCurrent(r) {
				stale++
				example = fmt.Sprintf("%s (generation %d): %+v", r.Name, r.Generation, r.Status.Parents)
			}
		}
		stale += n - len(list.Items)
		if stale == 0 {
			return max(lastStale, 0)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d routes without a current status after %s, e.g. %s", stale, n, timeout, example)
		}
		lastStale = stale
		time.Sleep(200 * time.Millisecond)
	}
}

// statusCurrent: our parent entry is Accepted and each of its conditions observed the route's
// generation.
func statusCurrent(r *gwapiv1.HTTPRoute) bool {
	for _, p := range r.Status.Parents {
		if p.ControllerName != translator.DefaultControllerName {
			continue
		}
		if len(p.Conditions) == 0 {
			return false
		}
		for _, c := range p.Conditions {
			if c.ObservedGeneration != r.Generation || (c.Type == "Accepted" && c.Status != metav1.ConditionTrue) {
				return false
			}
		}
		return true
	}
	return false
}
