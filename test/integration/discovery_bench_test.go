package integration

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller/discovery"
	"github.com/coxswain-labs/coxswain/test/integration/env"
)

// BenchmarkDiscoveryFleet measures the discovery protocol between real processes: one
// `coxswain controller` (5,000 HTTPRoutes) and 0, 1, then 20 `coxswain proxy` processes. For
// each fleet size it makes 10 EndpointSlice changes and reports:
//
//   - p50/p99-ms: from the controller publishing a snapshot to a proxy acknowledging it (every
//     proxy, every change), as the controller's fleet view records them;
//   - ctl-cpu-ms/push: controller CPU time per change, until every proxy acknowledged it;
//   - ctl-rss-MiB: the controller's resident set with that many proxies connected.
//
// One run is one measurement: -benchtime 1x (see docs/discovery.md).
func BenchmarkDiscoveryFleet(b *testing.B) {
	for range b.N {
		measureFleet(b, 5000)
	}
}

func measureFleet(b *testing.B, routes int) {
	b.StopTimer()
	e := env.Start(b)
	ctrlNS := namespace(b, e, "coxswain", nil)
	ns := namespace(b, e, "bench", nil)
	startBackend(b, "main", "10.99.7.1:8080")
	createService(b, e, ns, "svc", "10.99.7.1")
	createClass(b, e, "coxswain", "")
	createGateway(b, e, ns, "gw", "coxswain", httpListener("http", benchPort))
	createRoutes(b, e, ns, routes)
	ctrl := startFleetController(b, e, "controller", ctrlNS, "--leader-elect=false", "--kube-api-qps", "500", "--kube-api-burst", "1000")
	waitRouteParent(b, e, ns, fmt.Sprintf("pre-%d", routes-1), "", "", accepted, resolved)
	files := mountProxyFiles(b, e, ctrlNS, ctrlNS, "coxswain-proxy")
	pid := ctrl.cmd.Process.Pid

	var proxies []*proxyProcess
	change := 0
	for _, n := range []int{0, 1, 20} {
		for len(proxies) < n {
			i := len(proxies)
			proxies = append(proxies, startProxyProcess(b, fmt.Sprintf("p%02d", i), fmt.Sprintf("10.99.2.%d", i+1), files, ctrl.discovery, "--log-level", "warn"))
		}
		allAcked(b, ctrl, n, "")
		var lat []time.Duration
		cpu0 := cpuTime(b, pid)
		const changes = 10
		for range changes {
			change++
			before := fleetOf(b, ctrl).Version
			setEndpoints(b, e, ns, "svc", fmt.Sprintf("10.99.7.%d", 1+change%2))
			f := allAcked(b, ctrl, n, before)
			for _, p := range f.Proxies {
				lat = append(lat, p.AckedAt.Sub(f.PublishedAt))
			}
		}
		cpu := cpuTime(b, pid) - cpu0
		rss := float64(rssKiB(b, pid)) / 1024
		b.ReportMetric(ms(cpu)/changes, fmt.Sprintf("ctl-cpu-ms/push@%d", n))
		b.ReportMetric(rss, fmt.Sprintf("ctl-rss-MiB@%d", n))
		if n > 0 {
			b.ReportMetric(ms(percentile(lat, 50)), fmt.Sprintf("p50-ms@%d", n))
			b.ReportMetric(ms(percentile(lat, 99)), fmt.Sprintf("p99-ms@%d", n))
		}
	}
}

// createRoutes creates n HTTPRoutes pre-<i> (own hostname, one rule to svc) concurrently.
func createRoutes(b *testing.B, e *env.Env, ns string, n int) {
	parents := []gwapiv1.ParentReference{parentRef(ns, "gw")}
	var wg sync.WaitGroup
	work := make(chan int)
	errs := make(chan error, n)
	for range 16 {
		wg.Go(func() {
			for i := range work {
				r := httpRoute(ns, fmt.Sprintf("pre-%d", i), parents, []string{fmt.Sprintf("pre-%d.bench", i)}, prefixRule("/", backendRef("svc", 1)))
				if _, err := e.Gateway.GatewayV1().HTTPRoutes(ns).Create(ctxFor(b), r, metav1.CreateOptions{}); err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

func fleetOf(b *testing.B, c *fleetController) discovery.Fleet {
	f, err := c.fleet()
	if err != nil {
		b.Fatal(err)
	}
	return f
}

// allAcked waits until a snapshot other than before is published and n proxies acknowledged it.
func allAcked(b *testing.B, c *fleetController, n int, before string) discovery.Fleet {
	var f discovery.Fleet
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var err error
		if f, err = c.fleet(); err == nil && f.Version != "" && f.Version != before && len(f.Proxies) == n {
			done := true
			for _, p := range f.Proxies {
				done = done && p.AckedVersion == f.Version
			}
			if done {
				return f
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d proxies did not acknowledge a new snapshot: %+v (%v)", n, f, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// cpuTime is the user + system CPU time of a process.
func cpuTime(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command name (which may hold spaces) start after the last ')'.
	fields := strings.Fields(string(raw)[strings.LastIndexByte(string(raw), ')')+2:])
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	const ticks = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticks
}
