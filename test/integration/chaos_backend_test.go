package integration

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/test/integration/env"
)

const (
	podA, podB     = "10.99.41.11", "10.99.41.12"
	heldPerRoute   = 6
	breakerMinReqs = 4
)

// TestChaosBackendReset kills a backend pod in the middle of requests, under chaosLoad: the pod
// resets every connection it has (RST) and its port closes. Exactly the requests in flight to it
// fail on a route without retries; on a route with an HTTPRoute retry every one of them is
// answered by the other pod, one retry each; afterwards the retrying route keeps answering 200
// (its tries at the dead pod retried as connect failures), a route whose Service has a
// CoxswainBackendPolicy circuit breaker (threshold 50%, minRequests 4) fails exactly 4 requests
// before the breaker opens and sends the rest to the live pod, and once the EndpointSlice drops
// the dead pod, the route without retries is whole again. The steady load on the other routes
// never notices.
func TestChaosBackendReset(t *testing.T) {
	e := env.Start(t)
	f := startChaosFleet(t, e, 1, 1)
	p := f.proxies[0]
	a := startPodBackend(t, "pod-a", podA+":8080")
	b := startPodBackend(t, "pod-b", podB+":8080")
	createService(t, e, f.ns, "pods", podA, podB)
	createService(t, e, f.ns, "guarded", podA, podB)
	createPolicy(t, e, f.ns, "breaker", map[string]any{
		"targetRefs": []any{serviceTarget("guarded")},
		"circuitBreaker": map[string]any{"threshold": int64(50), "minRequests": int64(breakerMinReqs),
			"window": "1m", "openDuration": "1m"},
	})
	waitAncestor(t, e, f.ns, "breaker", "guarded", "True", "Accepted", "Applied to Service "+f.ns+"/guarded")
	http := []gwapiv1.ParentReference{sectionRef(f.ns, "gw", "http")}
	createRoute(t, e, httpRoute(f.ns, "plain", http, []string{"plain.example"}, prefixRule("/", backendRef("pods", 1))))
	retried := prefixRule("/", backendRef("pods", 1))
	retried.Retry = &gwapiv1.HTTPRouteRetry{Attempts: ptr.To(2), Codes: []gwapiv1.HTTPRouteRetryStatusCode{503}}
	createRoute(t, e, httpRoute(f.ns, "retried", http, []string{"retried.example"}, retried))
	// The breaker's window must hold only what the test counts, so the route is proven served
	// through a rule to another Service (another breaker) before any request reaches guarded.
	createRoute(t, e, httpRoute(f.ns, "breaker", http, []string{"breaker.example"},
		prefixRule("/", backendRef("guarded", 1)), prefixRule("/ready", backendRef("web", 1))))
	for _, host := range []string{"plain.example", "retried.example"} {
		servedAt(t, p.ip, chaosHTTPPort, host, "/", 200, "pod-a")
		servedAt(t, p.ip, chaosHTTPPort, host, "/", 200, "pod-b")
	}
	servedAt(t, p.ip, chaosHTTPPort, "breaker.example", "/ready", 200, "web")
	load := startChaosLoad(t, f.targets())

	// Requests in flight to both pods on both routes, started one at a time so that round robin
	// spreads them over the pods.
	results := map[string]chan response{}
	for _, host := range []string{"plain.example", "retried.example"} {
		results[host] = make(chan response, heldPerRoute)
		for i := range heldPerRoute {
			go func() {
				r, err := getAt(p.ip, chaosHTTPPort, host, "/hold")
				if err != nil {
					r = response{body: err.Error()}
				}
				results[host] <- r
			}()
			eventually(t, fmt.Sprintf("%d requests for %s held", i+1, host), func() error {
				if n := a.heldFrom(host) + b.heldFrom(host); n != i+1 {
					return fmt.Errorf("%d held", n)
				}
				return nil
			})
		}
	}
	inFlightA := map[string]int{}
	for _, host := range []string{"plain.example", "retried.example"} {
		inFlightA[host] = a.heldFrom(host)
		if inFlightA[host] == 0 || inFlightA[host] == heldPerRoute {
			t.Fatalf("%s: %d of %d requests in flight to pod-a: round robin should have spread them", host, inFlightA[host], heldPerRoute)
		}
	}
	retriedObj := "HTTPRoute/" + f.ns + "/retried"
	retriesBefore := p.sumMetric(t, "coxswain_proxy_retries_total", "route="+retriedObj)

	a.kill()
	load.more(t, 5) // the load runs through the kill
	// The retried route's requests at pod-a land on pod-b, which holds them with its own.
	eventually(t, "retried.example's requests in flight to pod-a retried on pod-b", func() error {
		if n := b.heldFrom("retried.example"); n != heldPerRoute {
			return fmt.Errorf("pod-b holds %d of %d", n, heldPerRoute)
		}
		return nil
	})
	b.release()
	for host, want := range map[string]struct{ failed, fromB int }{
		"plain.example":   {failed: inFlightA["plain.example"], fromB: heldPerRoute - inFlightA["plain.example"]},
		"retried.example": {failed: 0, fromB: heldPerRoute},
	} {
		failed, fromB := 0, 0
		var statuses []string
		for range heldPerRoute {
			r := <-results[host]
			statuses = append(statuses, fmt.Sprintf("%d %s", r.status, strings.TrimSpace(r.body)))
			switch {
			case r.status == 200 && r.backend == "pod-b":
				fromB++
			case r.status == 502:
				failed++
			default:
				t.Errorf("%s: unexpected answer %d from %q: %s", host, r.status, r.backend, r.body)
			}
		}
		t.Logf("%s: %d requests in flight, %d of them to pod-a when it died: %d failed (502), %d answered by pod-b: %v",
			host, heldPerRoute, inFlightA[host], failed, fromB, statuses)
		if failed != want.failed || fromB != want.fromB {
			t.Errorf("%s: %d failed and %d answered by pod-b, want %d and %d", host, failed, fromB, want.failed, want.fromB)
		}
	}
	if got := p.sumMetric(t, "coxswain_proxy_retries_total", "route="+retriedObj) - retriesBefore; got != float64(inFlightA["retried.example"]) {
		t.Errorf("coxswain_proxy_retries_total of %s went up by %v, want one per request in flight to pod-a (%d)",
			retriedObj, got, inFlightA["retried.example"])
	}

	t.Run("the retrying route keeps answering while the dead pod is still an endpoint", func(t *testing.T) {
		before := p.sumMetric(t, "coxswain_proxy_retries_total", "route="+retriedObj, "reason=connect")
		for i := range 10 {
			if r, err := getAt(p.ip, chaosHTTPPort, "retried.example", "/"); err != nil || r.status != 200 || r.backend != "pod-b" {
				t.Errorf("request %d: %d from %q (%v): %s", i, r.status, r.backend, err, r.body)
			}
		}
		connect := p.sumMetric(t, "coxswain_proxy_retries_total", "route="+retriedObj, "reason=connect") - before
		t.Logf("10 requests after the kill: all answered by pod-b, %v of them retried after a refused connect to pod-a", connect)
		if connect < 1 {
			t.Errorf("no connect retry counted: round robin never offered pod-a?")
		}
	})

	t.Run("the circuit breaker opens after minRequests failures", func(t *testing.T) {
		breakerObj := "HTTPRoute/" + f.ns + "/breaker"
		failed, fromB := 0, 0
		var order []int
		for range 20 {
			r, err := getAt(p.ip, chaosHTTPPort, "breaker.example", "/")
			switch {
			case err != nil:
				t.Fatal(err)
			case r.status == 200 && r.backend == "pod-b":
				fromB++
			case r.status == 502:
				failed++
			default:
				t.Errorf("unexpected answer %d from %q: %s", r.status, r.backend, r.body)
			}
			order = append(order, r.status)
		}
		state := p.sumMetric(t, "coxswain_proxy_circuit_breaker_state", "route="+breakerObj, "upstream="+podA+":8080")
		rejected := p.sumMetric(t, "coxswain_proxy_circuit_breaker_rejected_total", "route="+breakerObj, "upstream="+podA+":8080")
		stateB := p.sumMetric(t, "coxswain_proxy_circuit_breaker_state", "route="+breakerObj, "upstream="+podB+":8080")
		t.Logf("20 requests: %d failed, %d answered by pod-b (statuses in order %v); pod-a's breaker state %v, %v requests it refused (sent to pod-b); pod-b's breaker %v",
			failed, fromB, order, state, rejected, stateB)
		if failed != breakerMinReqs || fromB != 20-breakerMinReqs {
			t.Errorf("%d failed, %d answered by pod-b: want exactly minRequests (%d) failures before the breaker opens", failed, fromB, breakerMinReqs)
		}
		if state != 1 || stateB != 0 || rejected < 1 {
			t.Errorf("breaker of pod-a: state %v (want 1, open), %v rejected (want ≥ 1); of pod-b: state %v (want 0)", state, rejected, stateB)
		}
		if a.answeredFor("breaker.example") != 0 {
			t.Errorf("pod-a answered breaker.example before it died: the window held more than the test counted")
		}
	})

	t.Run("the EndpointSlice drops the dead pod", func(t *testing.T) {
		setEndpoints(t, e, f.ns, "pods", podB)
		servedAt(t, p.ip, chaosHTTPPort, "plain.example", "/", 200, "pod-b")
		for i := range 20 {
			if r, err := getAt(p.ip, chaosHTTPPort, "plain.example", "/"); err != nil || r.status != 200 || r.backend != "pod-b" {
				t.Errorf("request %d after the endpoint update: %d from %q (%v)", i, r.status, r.backend, err)
			}
		}
	})

	load.more(t, 20)
	rep := load.stop()
	loadAvg(t)
	rep.requireClean(t, "backend pod killed mid-request")
}
