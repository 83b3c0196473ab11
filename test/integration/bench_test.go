package integration

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/test/integration/env"
)

// BenchmarkPropagation measures, against the real API server and the real `coxswain controller`
// binary:
//
//   - route-p50/p99-ms: from an HTTPRoute create call returning to the first 200 through the proxy
//     (when the successful GET was sent: bench_poll_test.go), over 100 routes created one by one on
//     top of the pre-existing ones;
//   - endpoint-p50/p99-ms: from an EndpointSlice update call returning to the first response from
//     the new endpoint, over 100 updates;
//   - rss-MiB: the controller's resident set once everything is served, and what it is made of
//     (memoryReport: rss-anon/file-MiB, heap-live-MiB, heap-goal-MiB, ...);
//   - ctl-cpu-ms/route: the controller process's CPU time (user + system, from /proc) over the
//     100 route creations, per route: translation, status writes, the in-process proxy's table
//     builds and the informers' decoding together;
//   - status-drain-ms: from the controller's start to every pre-existing route having its
//     status (bench_drain_test.go), and status-writes-drain the controller's status writes by
//     then (every kind: routes, the Gateway, its class); status-writes the writes at the end;
//   - burst200-ms: from the first of 200 HTTPRoutes created at once (16 concurrent clients) to
//     the last of them answering 200;
//   - where the route latency went, stage by stage, from the controller's and the proxy's logs
//     (bench_breakdown_test.go): the mean of each as <stage>-ms, p50 and p99 in the log,
//     publishes/route and translations/route.
//
// "routes=N" runs the controller with its in-process proxy (one process, as the figures in
// docs/controller.md always did); "routes=N,proxy=separate" runs it with the data plane apart, as
// production does: the controller streams snapshots to a `coxswain proxy` process over discovery,
// and rss-MiB and ctl-cpu-ms/route are then the controller's alone (proxy-rss-MiB and
// proxy-cpu-ms/route the proxy's); "routes=N,proxy=dedicated" likewise with a dedicated proxy of
// the Gateway (`proxy --gateway`), which gets the snapshot tailored to its Gateway. With PROPAGATION_PROFILE_DIR set, the controller's heap
// profile at the end (after a collection) is written there, for `go tool pprof`;
// PROPAGATION_CONTROLLER_ARGS adds flags to the controller's command line (space-separated).
//
// Each sub-benchmark is one full measurement: run it with -benchtime 1x (see docs/controller.md).
func BenchmarkPropagation(b *testing.B) {
	for _, existing := range []int{1000, 5000, 20000} {
		for _, mode := range []proxyMode{inProcess, separate, dedicated} {
			b.Run(fmt.Sprintf("routes=%d%s", existing, mode), func(b *testing.B) {
				for range b.N {
					measurePropagation(b, existing, mode)
				}
			})
		}
	}
}

const benchPort = 18500

func measurePropagation(b *testing.B, existing int, mode proxyMode) {
	b.StopTimer()
	e := env.Start(b)
	ns := namespace(b, e, "bench", nil)
	startBackend(b, "main", "10.99.7.1:8080")
	createService(b, e, ns, "svc", "10.99.7.1")
	createClass(b, e, "coxswain", "")
	createGateway(b, e, ns, "gw", "coxswain", httpListener("http", benchPort))
	parents := []gwapiv1.ParentReference{parentRef(ns, "gw")}
	route := func(name, host, svc string) *gwapiv1.HTTPRoute {
		return httpRoute(ns, name, parents, []string{host}, prefixRule("/", backendRef(svc, 1)))
	}

	// The pre-existing routes, created concurrently before the controller starts.
	var wg sync.WaitGroup
	work := make(chan int)
	errs := make(chan error, existing)
	for range 16 {
		wg.Go(func() {
			for i := range work {
				r := route(fmt.Sprintf("pre-%d", i), fmt.Sprintf("pre-%d.bench", i), "svc")
				if _, err := e.Gateway.GatewayV1().HTTPRoutes(ns).Create(ctxFor(b), r, metav1.CreateOptions{}); err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range existing {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}

	drain := watchStatusDrain(b, e, ns, existing)
	// Default pacing (holdoff and max delay): the figures are those of the shipped configuration.
	ctl := startBenchController(b, e, ns, mode)
	proc := ctl.process
	drainFrom := time.Now()
	// The first translation of thousands of routes, and a proxy connecting, take longer than
	// the usual wait on the loaded machine.
	firstOKWithin(b, fmt.Sprintf("pre-%d.bench", existing-1), "main", 5*time.Minute, 25*time.Millisecond)
	// Let the status backlog of the pre-existing routes drain, to measure a steady state: until
	// every one of them has its status. At thousands of routes on the loaded machine that takes
	// longer than the usual wait.
	b.ReportMetric(ms(drain.wait(b, 5*time.Minute).Sub(drainFrom)), "status-drain-ms")
	b.ReportMetric(statusWrites(b, ctl.admin), "status-writes-drain")

	b.StartTimer()
	var routeLat []time.Duration
	var routes []created
	logFrom := len(proc.out.String())
	var proxyLogFrom int
	if ctl.proxy != nil {
		proxyLogFrom = len(ctl.proxy.out.String())
	}
	dials := pollDials.Load()
	cpu := cpuTicks(b, proc.cmd.Process.Pid)
	var proxyCPU int64
	if ctl.proxy != nil {
		proxyCPU = cpuTicks(b, ctl.proxy.cmd.Process.Pid)
	}
	stopProfile := cpuProfile(b, ctl.admin)
	for i := range 100 {
		host := fmt.Sprintf("new-%d.bench", i)
		createRoute(b, e, route(fmt.Sprintf("new-%d", i), host, "svc"))
		start := time.Now()
		served := firstOK(b, host, "main")
		routeLat = append(routeLat, served.Sub(start))
		routes = append(routes, created{returned: start, served: served})
	}
	cpu = cpuTicks(b, proc.cmd.Process.Pid) - cpu
	stopProfile()
	b.ReportMetric(float64(cpu)*1000/clockTicks/100, "ctl-cpu-ms/route")
	if ctl.proxy != nil {
		proxyCPU = cpuTicks(b, ctl.proxy.cmd.Process.Pid) - proxyCPU
		b.ReportMetric(float64(proxyCPU)*1000/clockTicks/100, "proxy-cpu-ms/route")
	}
	var proxyLog string
	if ctl.proxy != nil {
		proxyLog = ctl.proxy.out.String()[proxyLogFrom:]
	}
	breakdown(b, proc.out.String()[logFrom:], proxyLog, routes)

	// A burst: 200 routes created at once, timed to the last one served.
	burstStart := time.Now()
	burst := make(chan int)
	var bwg sync.WaitGroup
	for range 16 {
		bwg.Go(func() {
			for i := range burst {
				createRoute(b, e, route(fmt.Sprintf("burst-%d", i), fmt.Sprintf("burst-%d.bench", i), "svc"))
			}
		})
	}
	for i := range 200 {
		burst <- i
	}
	close(burst)
	bwg.Wait()
	for i := range 200 {
		firstOK(b, fmt.Sprintf("burst-%d.bench", i), "main")
	}
	b.ReportMetric(ms(time.Since(burstStart)), "burst200-ms")

	// Endpoint changes: one Service whose single endpoint moves to a new backend each time.
	for i := range 100 {
		startBackend(b, fmt.Sprintf("ep-%d", i), fmt.Sprintf("10.99.8.%d:8080", i+1))
	}
	createService(b, e, ns, "moving", "10.99.8.1")
	createRoute(b, e, route("moving", "moving.bench", "moving"))
	served(b, benchPort, "moving.bench", "/", 200, "ep-0")
	var epLat []time.Duration
	for i := 1; i < 100; i++ {
		setEndpoints(b, e, ns, "moving", fmt.Sprintf("10.99.8.%d", i+1))
		start := time.Now()
		epLat = append(epLat, firstOK(b, "moving.bench", fmt.Sprintf("ep-%d", i)).Sub(start))
	}
	// One connection for all the polling, unless the proxy closed it.
	b.ReportMetric(float64(pollDials.Load()-dials), "poll-dials")
	b.ReportMetric(ms(percentile(routeLat, 50)), "route-p50-ms")
	b.ReportMetric(ms(percentile(routeLat, 99)), "route-p99-ms")
	b.ReportMetric(ms(percentile(epLat, 50)), "endpoint-p50-ms")
	b.ReportMetric(ms(percentile(epLat, 99)), "endpoint-p99-ms")
	b.ReportMetric(statusWrites(b, ctl.admin), "status-writes")
	memoryReport(b, proc.cmd.Process.Pid, ctl.admin, "")
	if ctl.proxy != nil {
		memoryReport(b, ctl.proxy.cmd.Process.Pid, "", "proxy-")
	}
	b.StopTimer()
}

func percentile(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(0, min(len(s)-1, i-1))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's CPU times (100 on Linux).
const clockTicks = 100

// cpuTicks reads a process's user + system CPU time from /proc/<pid>/stat, in clock ticks.
func cpuTicks(b *testing.B, pid int) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The command name may hold spaces: the fields we want follow its closing parenthesis.
	fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("parsing /proc/%d/stat: %v %v", pid, err1, err2)
	}
	return utime + stime
}
