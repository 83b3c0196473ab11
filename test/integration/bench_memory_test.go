package integration

import (
	"bufio"
	"cmp"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/coxswain-labs/coxswain/controller/adminapi"
	"github.com/coxswain-labs/coxswain/controller/discovery"
	"github.com/coxswain-labs/coxswain/test/integration/env"
)

// benchController is the controller BenchmarkPropagation measures, and its proxy process when
// the data plane runs apart.
type benchController struct {
	*process
	admin string        // host:port of its admin API, with profiling on
	proxy *proxyProcess // nil: the in-process proxy serves
}

// proxyMode is where BenchmarkPropagation's data plane runs.
type proxyMode int

const (
	inProcess proxyMode = iota // the controller's in-process proxy
	separate                   // a shared `coxswain proxy` process, over discovery
	dedicated                  // a dedicated `coxswain proxy --gateway` of the benchmark's Gateway
)

// String is the mode's part of the sub-benchmark's name.
func (m proxyMode) String() string {
	return [...]string{"", ",proxy=separate", ",proxy=dedicated"}[m]
}

// startBenchController starts `coxswain controller` with profiling on its admin address: with
// the in-process proxy, or with discovery and one `coxswain proxy` binding gatewayIP, shared or
// dedicated to Gateway ns/gw (running as its ServiceAccount, as a provisioned one would).
func startBenchController(b *testing.B, e *env.Env, ns string, mode proxyMode) benchController {
	args := []string{"--leader-elect=false", "--kube-api-qps", "500", "--kube-api-burst", "1000", "--admin-pprof"}
	// A/B of the controller's settings (e.g. --memory-limit=90MiB) in the same benchmark.
	args = append(args, strings.Fields(os.Getenv("PROPAGATION_CONTROLLER_ARGS"))...)
	if mode == inProcess {
		admin := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(b)))
		return benchController{process: startProcess(b, e, "controller", append(args, "--admin-address", admin)...), admin: admin}
	}
	ctrlNS := namespace(b, e, "coxswain", nil)
	ctrl := startFleetController(b, e, "controller", ctrlNS, args...)
	var px *proxyProcess
	if mode == dedicated {
		sans, sa := discovery.DedicatedServiceAccount(ns, "gw")
		files := mountProxyFiles(b, e, ctrlNS, sans, sa)
		px = startProxyProcess(b, "proxy", gatewayIP, files, ctrl.discovery, "--gateway", ns+"/gw")
	} else {
		files := mountProxyFiles(b, e, ctrlNS, ctrlNS, "coxswain-proxy")
		px = startProxyProcess(b, "proxy", gatewayIP, files, ctrl.discovery)
	}
	return benchController{process: ctrl.process, admin: ctrl.admin, proxy: px}
}

// memoryReport reports what the resident set of process pid is made of, each metric's name
// prefixed with prefix:
//
//   - rss-MiB: VmRSS, the figure docs/controller.md has always given; rss-anon-MiB and
//     rss-file-MiB split it into anonymous memory (Go's heap, stacks and runtime) and the pages
//     of the binary mapped in (code, read-only data), which no change to the heap moves;
//
// and, when admin (a controller's admin address with --admin-pprof) is given, from the Go
// runtime, read first as the process left it and then after a forced collection:
//
//   - heap-goal-MiB: the heap size at which the next collection starts (GOGC's headroom over
//     what was live at the last one), heap-free-MiB the free heap pages still resident,
//     stacks-MiB the goroutine stacks, go-sys-MiB all the runtime has mapped;
//   - heap-live-MiB: the heap in use right after the collection, what the process really keeps.
//
// With PROPAGATION_PROFILE_DIR set, the heap profile taken with that collection is written there.
func memoryReport(b *testing.B, pid int, admin, prefix string) {
	const mib = 1 << 20
	b.ReportMetric(float64(rssKiB(b, pid))/1024, prefix+"rss-MiB")
	b.ReportMetric(float64(statusKiB(b, pid, "RssAnon"))/1024, prefix+"rss-anon-MiB")
	b.ReportMetric(float64(statusKiB(b, pid, "RssFile"))/1024, prefix+"rss-file-MiB")
	if admin == "" {
		return
	}
	m := goMemstats(b, admin)
	b.ReportMetric(m["next_gc_bytes"]/mib, prefix+"heap-goal-MiB")
	b.ReportMetric((m["heap_idle_bytes"]-m["heap_released_bytes"])/mib, prefix+"heap-free-MiB")
	b.ReportMetric(m["stack_inuse_bytes"]/mib, prefix+"stacks-MiB")
	b.ReportMetric(m["sys_bytes"]/mib, prefix+"go-sys-MiB")

	// ?gc=1 collects before it profiles, so the profile and the heap read after it are what is live.
	profile, err := httpGet("http://" + admin + adminapi.ProfilingPath + "heap?gc=1")
	if err != nil {
		b.Fatalf("heap profile: %v", err)
	}
	b.ReportMetric(goMemstats(b, admin)["heap_alloc_bytes"]/mib, prefix+"heap-live-MiB")
	if dir := os.Getenv("PROPAGATION_PROFILE_DIR"); dir != "" {
		name := strings.NewReplacer("/", "_", ",", "_", "=", "").Replace(b.Name()) + ".heap.pb.gz"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(profile), 0o644); err != nil {
			b.Fatal(err)
		}
		b.Logf("heap profile: %s", filepath.Join(dir, name))
	}
}

// goMemstats reads the go_memstats_* gauges of the admin address's /metrics, without the prefix.
func goMemstats(b *testing.B, admin string) map[string]float64 {
	body, err := httpGet("http://" + admin + "/metrics")
	if err != nil {
		b.Fatalf("metrics: %v", err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(body, "\n") {
		name, value, ok := strings.Cut(line, " ")
		if rest, isMem := strings.CutPrefix(name, "go_memstats_"); ok && isMem {
			if v, err := strconv.ParseFloat(value, 64); err == nil {
				out[rest] = v
			}
		}
	}
	for _, need := range []string{"next_gc_bytes", "heap_idle_bytes", "heap_released_bytes", "stack_inuse_bytes", "sys_bytes", "heap_alloc_bytes"} {
		if _, ok := out[need]; !ok {
			b.Fatalf("no go_memstats_%s in /metrics", need)
		}
	}
	return out
}

// statusKiB reads a kB field of /proc/<pid>/status (VmRSS, RssAnon, RssFile).
func statusKiB(b *testing.B, pid int, field string) int {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// rssKiB reads VmRSS of a process.
func rssKiB(b *testing.B, pid int) int { return statusKiB(b, pid, "VmRSS") }

// cpuProfile starts a CPU profile of the controller at admin (its --admin-pprof) when
// PROPAGATION_PROFILE_DIR is set, lasting PROPAGATION_CPU_SECONDS (default 8: about the
// 100 route creations at 5,000 routes); the returned function waits for it and writes it there.
// net/http/pprof profiles for a fixed time only, so the profile may end before or after the
// creations do: it is for where the controller's time goes, not for figures.
func cpuProfile(b *testing.B, admin string) (wait func()) {
	dir := os.Getenv("PROPAGATION_PROFILE_DIR")
	if dir == "" || admin == "" {
		return func() {}
	}
	seconds := cmp.Or(os.Getenv("PROPAGATION_CPU_SECONDS"), "8")
	done := make(chan struct{})
	var profile string
	var err error
	go func() {
		defer close(done)
		profile, err = httpGet("http://" + admin + adminapi.ProfilingPath + "profile?seconds=" + seconds)
	}()
	return func() {
		<-done
		if err != nil {
			b.Fatalf("CPU profile: %v", err)
		}
		name := strings.NewReplacer("/", "_", ",", "_", "=", "").Replace(b.Name()) + ".cpu.pb.gz"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(profile), 0o644); err != nil {
			b.Fatal(err)
		}
		b.Logf("CPU profile: %s", filepath.Join(dir, name))
	}
}
