package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/coxswain-labs/coxswain/controller/adminapi"
	"github.com/coxswain-labs/coxswain/test/integration/env"
)

// validRoutes is how many valid HTTPRoutes TestBadInputAtScale serves while it injects the
// invalid objects (len(badCases) × badCopies of them).
const validRoutes = 1000

// badProxyIP is where the test's `coxswain proxy` binds its listeners.
const badProxyIP = "10.99.0.70"

// TestBadInputAtScale is issue 20's bad input at scale in cluster mode: a real API server, a
// `coxswain controller` process and a `coxswain proxy` process. 1,000 valid HTTPRoutes are served;
// then 100 invalid objects of every kind the controller reads are injected (bad regexes, missing
// and ungranted references, conflicting listeners, unknown filter kinds, oversized fields, invalid
// hostnames, bad policies and filters, L4 and gRPC routes with bad references, an Ingress with bad
// annotations, a conflicting ListenerSet). Every valid route must still answer correctly by
// request, every invalid object must carry a condition (or, for kinds without conditions, a
// /api/v1/problems entry) naming its field, and what the CRDs forbid must be refused by the API
// server naming the field. The controller's and proxy's peak RSS are logged.
func TestBadInputAtScale(t *testing.T) {
	start := time.Now()
	e := env.Start(t)
	ctrlNS := namespace(t, e, "coxswain", nil)
	ctl := startFleetController(t, e, "controller", ctrlNS, "--leader-elect=false", "--kube-api-qps", "300", "--kube-api-burst", "600",
		"--ingress-http-address", fmt.Sprintf("0.0.0.0:%d", badIngressPort), "--ingress-https-address", fmt.Sprintf("0.0.0.0:%d", badIngressTLSPort))
	ns := namespace(t, e, "badin", nil)
	other := namespace(t, e, "badin-other", nil)
	for i := range 4 {
		name, ip := fmt.Sprintf("web-%d", i), fmt.Sprintf("10.99.43.%d", i+1)
		startBackend(t, name, ip+":8080")
		createService(t, e, ns, name, ip)
	}
	createService(t, e, other, "web-0", "10.99.43.1")
	for k := range badCopies {
		createService(t, e, ns, fmt.Sprintf("spare-%d", k), "10.99.43.9") // the bad policies' targets
	}
	createClass(t, e, "coxswain", "")
	if _, err := e.Kube.NetworkingV1().IngressClasses().Create(ctxFor(t), &networkingv1.IngressClass{
		ObjectMeta: metav1.ObjectMeta{Name: "coxswain-badin"}, Spec: networkingv1.IngressClassSpec{Controller: "coxswain-labs.dev/ingress-controller"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ap := newApplier(t, e)
	if err := ap.apply(t, mustUnstructured(t, fmt.Sprintf(`apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: %s}
spec:
  gatewayClassName: coxswain
  allowedListeners: {namespaces: {from: Same}}
  listeners:
  - {name: http, protocol: HTTP, port: %d}
  - {name: tcp, protocol: TCP, port: %d}
  - {name: udp, protocol: UDP, port: %d}
  - {name: tls, protocol: TLS, port: %d, hostname: "*.tls.example", tls: {mode: Passthrough}}
`, ns, badHTTPPort, badTCPPort, badUDPPort, badTLSPort)), false); err != nil {
		t.Fatal(err)
	}
	files := mountProxyFiles(t, e, ctrlNS, ctrlNS, "coxswain-proxy")
	px := startProxyProcess(t, "proxy", badProxyIP, files, ctl.discovery)

	created := time.Now()
	createValidRoutes(t, e, ns)
	check := newRouteChecker()
	check.waitAll(t, 2*time.Minute)
	t.Logf("%d valid routes created and served in %s", validRoutes, time.Since(created).Round(time.Millisecond))

	injected := time.Now()
	objs := injectBadObjects(t, ap, ns, other)
	// A valid route made after the invalid objects: once it is served, the proxy runs a snapshot
	// translated with all of them.
	createRoute(t, e, validRoute(ns, "sentinel"))
	servedAt(t, badProxyIP, badHTTPPort, "sentinel.valid.example", "/", 200, "web-0")
	if failures := check.all(); len(failures) > 0 {
		t.Errorf("after the invalid objects, %d of %d valid routes answer wrongly; first: %v", len(failures), validRoutes, failures[:min(10, len(failures))])
	}
	checkBadObjects(t, ap, "http://"+ctl.admin, objs)
	t.Logf("%d invalid objects injected and each reported, and all %d valid routes re-checked, in %s",
		len(objs), validRoutes, time.Since(injected).Round(time.Millisecond))

	loadAvg(t)
	t.Logf("peak RSS: controller %s, proxy %s (VmHWM); whole test %s",
		peakRSS(t, ctl.cmd.Process.Pid), peakRSS(t, px.cmd.Process.Pid), time.Since(start).Round(time.Millisecond))
}

// validRoute is HTTPRoute name for name.valid.example: one of the four backends, and an X-Route
// response header saying which route answered.
func validRoute(ns, name string) *gwapiv1.HTTPRoute {
	i, _ := strconv.Atoi(strings.TrimPrefix(name, "valid-"))
	rule := prefixRule("/", backendRef(fmt.Sprintf("web-%d", i%4), 1))
	rule.Filters = []gwapiv1.HTTPRouteFilter{{Type: gwapiv1.HTTPRouteFilterResponseHeaderModifier,
		ResponseHeaderModifier: &gwapiv1.HTTPHeaderFilter{Set: []gwapiv1.HTTPHeader{{Name: "X-Route", Value: name}}}}}
	return httpRoute(ns, name, []gwapiv1.ParentReference{sectionRef(ns, "gw", "http")}, []string{name + ".valid.example"}, rule)
}

func validName(i int) string { return fmt.Sprintf("valid-%04d", i) }

// createValidRoutes creates the valid routes, 16 at a time.
func createValidRoutes(t *testing.T, e *env.Env, ns string) {
	t.Helper()
	ctx := ctxFor(t)
	var next atomic.Int64
	errs := make(chan error, validRoutes)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < validRoutes; i = int(next.Add(1) - 1) {
				if _, err := e.Gateway.GatewayV1().HTTPRoutes(ns).Create(ctx, validRoute(ns, validName(i)), metav1.CreateOptions{}); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// routeChecker requests every valid route through the proxy, 32 at a time on kept-alive
// connections.
type routeChecker struct{ c *http.Client }

func newRouteChecker() *routeChecker {
	return &routeChecker{c: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 32}}}
}

// one checks valid route i: 200 from its backend, with its X-Route.
func (rc *routeChecker) one(i int) error {
	name := validName(i)
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://%s:%d/", badProxyIP, badHTTPPort), nil)
	if err != nil {
		return err
	}
	req.Host = name + ".valid.example"
	res, err := rc.c.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	_ = res.Body.Close()
	if want := fmt.Sprintf("web-%d", i%4); res.StatusCode != http.StatusOK || res.Header.Get("X-Backend") != want || res.Header.Get("X-Route") != name {
		return fmt.Errorf("%s: %d from %q route %q, want 200 from %s", name, res.StatusCode, res.Header.Get("X-Backend"), res.Header.Get("X-Route"), want)
	}
	return nil
}

// check requests the routes of idx and returns what failed.
func (rc *routeChecker) check(idx []int) (failed []int, errs []string) {
	var mu sync.Mutex
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for j := int(next.Add(1) - 1); j < len(idx); j = int(next.Add(1) - 1) {
				if err := rc.one(idx[j]); err != nil {
					mu.Lock()
					failed, errs = append(failed, idx[j]), append(errs, err.Error())
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	slices.Sort(failed)
	return failed, errs
}

// all checks every valid route once.
func (rc *routeChecker) all() []string {
	idx := make([]int, validRoutes)
	for i := range idx {
		idx[i] = i
	}
	_, errs := rc.check(idx)
	return errs
}

// waitAll waits until every valid route has answered correctly once (re-checking only those not
// yet served).
func (rc *routeChecker) waitAll(t *testing.T, timeout time.Duration) {
	t.Helper()
	idx := make([]int, validRoutes)
	for i := range idx {
		idx[i] = i
	}
	deadline := time.Now().Add(timeout)
	for {
		var errs []string
		idx, errs = rc.check(idx)
		if len(idx) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d valid routes not served after %s; first: %v", len(idx), validRoutes, timeout, errs[:min(10, len(errs))])
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// badObject is one invalid object injected.
type badObject struct {
	c *badCase
	u *unstructured.Unstructured
}

func (o badObject) String() string { return o.c.kind + " " + o.u.GetNamespace() + "/" + o.u.GetName() }

// injectBadObjects applies badCopies of every bad case, 8 at a time. What the CRDs forbid must
// be refused naming its field; the rest are returned.
func injectBadObjects(t *testing.T, ap *applier, ns, other string) []badObject {
	t.Helper()
	var all []badObject
	for ci := range badCases {
		c := &badCases[ci]
		for k := range badCopies {
			all = append(all, badObject{c: c, u: mustUnstructured(t, fmt.Sprintf(c.yaml, ns, other, k, badGatewayPorts+ci*badCopies+k))})
		}
	}
	errs := make([]error, len(all))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(all); i = int(next.Add(1) - 1) {
				errs[i] = ap.apply(t, all[i].u, false)
			}
		})
	}
	wg.Wait()
	var kept []badObject
	refused := 0
	for i, o := range all {
		switch {
		case o.c.refused != "" && errs[i] == nil:
			t.Errorf("%s: accepted by the API server, want it refused for %s", o, o.c.refused)
		case o.c.refused != "" && !strings.Contains(errs[i].Error(), o.c.refused):
			t.Errorf("%s: refused with %q, which does not name %s", o, errs[i], o.c.refused)
		case o.c.refused != "":
			refused++
		case errs[i] != nil:
			t.Errorf("%s: %v", o, errs[i])
		default:
			kept = append(kept, o)
		}
	}
	if len(all) != 100 {
		t.Errorf("%d invalid objects, want 100", len(all))
	}
	t.Logf("%d invalid objects: %d refused by the API server (CRD validation), %d stored for the controller", len(all), refused, len(kept))
	return kept
}

// checkBadObjects waits until every stored invalid object is reported as its case wants.
func checkBadObjects(t *testing.T, ap *applier, admin string, objs []badObject) {
	t.Helper()
	ctx := ctxFor(t)
	pending := objs
	deadline := time.Now().Add(time.Minute)
	for {
		problems, err := fetchProblems(admin)
		var still []badObject
		var why []string
		for _, o := range pending {
			if err == nil {
				err2 := o.reported(ctx, ap, problems)
				if err2 == nil {
					continue
				}
				why = append(why, fmt.Sprintf("%s: %v", o, err2))
			} else {
				why = append(why, err.Error())
			}
			still = append(still, o)
		}
		if pending = still; len(pending) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, w := range why {
				t.Error(w)
			}
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// reported checks o's status condition and /api/v1/problems entry against its case.
func (o badObject) reported(ctx context.Context, ap *applier, problems adminapi.Problems) error {
	w := o.c.want
	if w.inStatus {
		m, err := ap.mapper.RESTMapping(o.u.GroupVersionKind().GroupKind(), o.u.GroupVersionKind().Version)
		if err != nil {
			return err
		}
		cur, err := ap.dyn.Resource(m.Resource).Namespace(o.u.GetNamespace()).Get(ctx, o.u.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		cs := failedConditions(cur.Object["status"], w.reasons, nil)
		if len(cs) == 0 {
			return fmt.Errorf("no False condition with reason %v in status %v", w.reasons, cur.Object["status"])
		}
		// A summary condition (the Gateway's Programmed: "no listener is programmed") may
		// share the reason; the one about the field must name it.
		for _, c := range cs {
			if strings.Contains(c.Message, w.field) {
				return nil
			}
		}
		c := cs[0]
		return fmt.Errorf("no condition names %s: %s=%s %s: %q (of %d with reason %v)", w.field, c.Type, c.Status, c.Reason, c.Message, len(cs), w.reasons)
	}
	list := problems.Problems
	if w.warning {
		list = problems.Warnings
	}
	for _, p := range list {
		if p.Object.Kind == o.c.kind && p.Object.Namespace == o.u.GetNamespace() && p.Object.Name == o.u.GetName() && strings.HasPrefix(p.Field, w.field) {
			return nil
		}
	}
	return fmt.Errorf("no /api/v1/problems entry (warning %v) naming %s", w.warning, w.field)
}

// failedConditions appends to out, from anywhere in an object's status (its conditions, its
// parents', listeners' or ancestors'), the conditions that say something is wrong (False, or
// Conflicted) with one of reasons.
func failedConditions(status any, reasons []string, out []*metav1.Condition) []*metav1.Condition {
	switch v := status.(type) {
	case map[string]any:
		if typ, ok := v["type"].(string); ok {
			c := &metav1.Condition{Type: typ}
			c.Status = metav1.ConditionStatus(fmt.Sprint(v["status"]))
			c.Reason, _ = v["reason"].(string)
			c.Message, _ = v["message"].(string)
			bad := c.Status == metav1.ConditionFalse || (c.Type == "Conflicted" && c.Status == metav1.ConditionTrue)
			if bad && slices.Contains(reasons, c.Reason) {
				out = append(out, c)
			}
			return out
		}
		for _, x := range v {
			out = failedConditions(x, reasons, out)
		}
	case []any:
		for _, x := range v {
			out = failedConditions(x, reasons, out)
		}
	}
	return out
}

func fetchProblems(admin string) (adminapi.Problems, error) {
	var p adminapi.Problems
	body, err := httpGet(admin + "/api/v1/problems")
	if err != nil {
		return p, err
	}
	return p, json.Unmarshal([]byte(body), &p)
}

func mustUnstructured(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
		t.Fatalf("%v in\n%s", err, doc)
	}
	return &unstructured.Unstructured{Object: m}
}

// peakRSS is a process's peak resident set size (VmHWM of /proc/PID/status).
func peakRSS(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return err.Error()
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				return v
			}
			return fmt.Sprintf("%.1f MiB", float64(kb)/1024)
		}
	}
	return "unknown"
}
