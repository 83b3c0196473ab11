package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coxswain-labs/coxswain/modules/filters/ratelimit/redistest"
)

// rateLimitFleetYAML is one proxy's world: a Gateway on port, and a route whose rules are
// limited by a Local, a Global (Open) and a Global Closed RateLimit, keyed by x-client.
func rateLimitFleetYAML(port, backend int) string {
	limit := func(name, mode, extra string) string {
		return fmt.Sprintf(`---
apiVersion: gateway.coxswain-labs.dev/v1alpha1
kind: RateLimit
metadata: {name: %s}
spec: {requests: 20, unit: Second, burst: 20, mode: %s, key: {type: Header, header: x-client}%s}
`, name, mode, extra)
	}
	rule := func(path, limit string) string {
		return fmt.Sprintf(`  - matches: [{path: {type: PathPrefix, value: /%s}}]
    filters: [{type: ExtensionRef, extensionRef: {group: gateway.coxswain-labs.dev, kind: RateLimit, name: %s}}]
    backendRefs: [{name: app, port: 80}]
`, path, limit)
	}
	return fmt.Sprintf(`apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: coxswain}
spec: {controllerName: coxswain-labs.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: coxswain
  addresses: [{type: IPAddress, value: 127.0.0.1}]
  listeners: [{name: http, protocol: HTTP, port: %d}]
---
apiVersion: v1
kind: Service
metadata: {name: app}
spec: {ports: [{name: http, port: 80}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: app, labels: {kubernetes.io/service-name: app}}
addressType: IPv4
ports: [{name: http, port: %d}]
endpoints: [{addresses: [127.0.0.1]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: limited}
spec:
  parentRefs: [{name: gw}]
  rules:
`, port, backend) + rule("local", "local") + rule("global", "global") + rule("closed", "closed") +
		limit("local", "Local", "") + limit("global", "Global", "") + limit("closed", "Global", ", failureMode: Closed")
}

// TestRateLimitFleet runs two `coxswain serve` processes sharing one redis-server and drives the
// same key through both: a Local limit admits about twice its rate (one bucket per replica), a
// Global one about its rate. Then Redis is killed: the Open limit admits, the Closed one answers
// 503, until Redis is back. COXSWAIN_RATELIMIT_SECONDS sets the load's length (10 by default).
func TestRateLimitFleet(t *testing.T) {
	redis := redistest.Start(t)
	app := startBackend(t, "app")
	// A Redis round trip may take longer than the default 50 ms on a loaded test machine (and a
	// race build); the test measures the limit, not that timeout, which TestGlobal covers.
	flags := []string{"--module-setting", "ratelimit.redis.address=" + redis.Addr, "--module-setting", "ratelimit.redis.timeout=1s"}
	var ports []int
	var servers []*server
	for range 2 {
		port := freePort(t)
		ports = append(ports, port)
		servers = append(servers, startServe(t, map[string]string{"world.yaml": rateLimitFleetYAML(port, app.port)}, flags...))
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	t.Cleanup(client.CloseIdleConnections)
	get := func(port int, path string) (int, error) {
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/%s", port, path), nil)
		req.Header.Set("x-client", "load")
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		_ = resp.Body.Close()
		return resp.StatusCode, nil
	}
	for _, port := range ports {
		eventually(t, 10*time.Second, "route served", func() error {
			code, err := get(port, "none") // no rule: 404 from the proxy, and nothing spent
			if err != nil {
				return err
			}
			if code != http.StatusNotFound {
				return fmt.Errorf("status %d", code)
			}
			return nil
		})
	}

	seconds := 10.0
	if v := os.Getenv("COXSWAIN_RATELIMIT_SECONDS"); v != "" {
		seconds, _ = strconv.ParseFloat(v, 64)
	} else if testing.Short() {
		seconds = 2
	}
	// The offered load is paced, 3x the limit at each proxy, not as fast as the machine goes: the
	// figure is the limit's accuracy, not the scheduler's under a saturated CPU.
	const rate, burst, workers, perWorker = 20.0, 20.0, 2, 30
	var admitted, refused, failed [2]atomic.Int64 // by path: local, global
	paths := []string{"local", "global"}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(seconds*float64(time.Second)))
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for _, port := range ports {
		for p := range paths {
			for range workers {
				wg.Go(func() {
					tick := time.NewTicker(time.Second / perWorker)
					defer tick.Stop()
					for {
						select {
						case <-ctx.Done():
							return
						case <-tick.C:
						}
						switch code, err := get(port, paths[p]); {
						case err != nil:
							failed[p].Add(1)
						case code == http.StatusOK:
							admitted[p].Add(1)
						case code == http.StatusTooManyRequests:
							refused[p].Add(1)
						default:
							failed[p].Add(1)
						}
					}
				})
			}
		}
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	allowed := burst + rate*elapsed // what one bucket admits over the run
	for p, path := range paths {
		ratio := float64(admitted[p].Load()) / allowed
		t.Logf("%-6s 2 proxies, %.1f s: %d admitted, %d refused, %d failed; allowed by one bucket %.0f; admitted/allowed = %.3f",
			path, elapsed, admitted[p].Load(), refused[p].Load(), failed[p].Load(), allowed, ratio)
		if failed[p].Load() > 0 {
			t.Errorf("%s: %d requests failed", path, failed[p].Load())
		}
		// Upper bounds always hold; the lower ones only once the load exceeded what the buckets
		// admit (a machine too busy to offer it cannot measure them).
		holders := map[string]float64{"local": 2, "global": 1}[path]
		want := map[string][2]float64{"local": {1.6, 2.2}, "global": {0.85, 1.15}}[path]
		offered := float64(admitted[p].Load() + refused[p].Load())
		if ratio > want[1] {
			t.Errorf("%s: admitted/allowed %.3f, want at most %.2f", path, ratio, want[1])
		}
		if offered < 1.3*holders*allowed {
			t.Logf("%s: only %.0f requests offered, too few to measure the lower bound", path, offered)
		} else if ratio < want[0] {
			t.Errorf("%s: admitted/allowed %.3f, want at least %.2f", path, ratio, want[0])
		}
	}
	for i, s := range servers {
		if n := strings.Count(s.log.String(), "rate limit store unreachable"); n > 0 {
			t.Logf("proxy %d: Redis did not answer in time during the load (%d WARN lines): those requests were admitted by failureMode Open", i, n)
			for _, line := range strings.Split(s.log.String(), "\n") {
				if strings.Contains(line, "rate limit store unreachable") {
					t.Log(line)
				}
			}
		}
	}

	// Redis gone: Open admits (the WARN says why), Closed refuses with 503.
	redis.Kill()
	want := func(path string, code int) {
		t.Helper()
		eventually(t, 10*time.Second, fmt.Sprintf("/%s answering %d", path, code), func() error {
			got, err := get(ports[0], path)
			if err != nil {
				return err
			}
			if got != code {
				return fmt.Errorf("status %d", got)
			}
			return nil
		})
	}
	want("closed", http.StatusServiceUnavailable)
	// The bucket of /global was spent by the load; with Redis gone, Open admits regardless.
	for range 5 {
		if code, err := get(ports[0], "global"); err != nil || code != http.StatusOK {
			t.Fatalf("/global with Redis down: %d %v, want 200 (failureMode Open)", code, err)
		}
	}
	servers[0].awaitLog("the WARN on Redis failure", "rate limit store unreachable", redis.Addr)
	redis.Restart()
	want("closed", http.StatusOK)
}
