package discovery_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/controller/translator/translatortest"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
)

// BenchmarkProxyFootprint is the resident memory of a real `coxswain proxy` process (the binary
// built from ./cmd/coxswain, or $COXSWAIN_BIN to compare builds) fed over discovery: the
// benchmark is the discovery server, pushes a translated snapshot of n HTTPRoutes, waits for the
// proxy's acknowledgement, checks that the last route serves, and reads /proc/<pid>/status:
//
//   - idle-rss-MiB: VmRSS once connected, before the first push (the binary and the runtime);
//   - rss-MiB, anon-MiB: VmRSS and its anonymous part (RssAnon: heap and stacks, not the
//     binary's file pages) right after the acknowledgement and one request;
//   - rss-settled-MiB, anon-settled-MiB: the same 3 s later (bench/runner's B8 reads the
//     standalone process's RSS after 3 s too);
//   - hwm-MiB: VmHWM, the peak while decoding and building the first table;
//   - hwm-update-MiB: VmHWM after a second push (the Gateway's generation changed, and with
//     cluster=per-route one endpoint), whose table is built while the first still serves;
//   - rss-update-settled-MiB: VmRSS 3 s after that.
//
// VmRSS includes the binary's file pages (VmRSS - RssAnon), which vary by a few MiB with the
// page cache's state of the binary: compare builds on RssAnon, or on copies made the same way.
//
// Routes are HTTPRoutes as bench/runner's B8 writes them (own hostname, one PathPrefix rule); the
// backends are either one Service for all (cluster=shared) or one Service with its own endpoint per
// route (cluster=per-route). One process per case; -benchtime 1x (each run is one measurement).
func BenchmarkProxyFootprint(b *testing.B) {
	bin := proxyBinary(b)
	for _, shape := range []string{"shared", "per-route"} {
		for _, n := range []int{1000, 10000} {
			b.Run(fmt.Sprintf("cluster=%s/routes=%d", shape, n), func(b *testing.B) {
				for range b.N {
					proxyFootprint(b, bin, n, shape == "per-route")
				}
			})
		}
	}
}

func proxyFootprint(b *testing.B, bin string, n int, perRoute bool) {
	b.StopTimer()
	backendHost, backendPort := backendServer(b, "be")
	port := freeLoopbackPort(b)
	snap := footprintSnapshot(b, n, perRoute, backendHost, backendPort, port, 0)
	s := startServer(b)
	s.lead(b)
	pid := startProxyProcess(b, bin, s, "footprint")
	eventually(b, "the proxy connects", func() error {
		if len(s.Fleet().Proxies) != 1 {
			return errors.New("not connected")
		}
		return nil
	})
	idle := procMem(b, pid)
	gw := "bench/gw"
	s.publish(b, snap)
	s.waitApplied(b, gw, 1)
	servesLast(b, port, n)
	loaded := procMem(b, pid)
	time.Sleep(3 * time.Second) // the measurement: what the runtime gives back (or not) when idle
	settled := procMem(b, pid)
	s.publish(b, footprintSnapshot(b, n, perRoute, backendHost, backendPort, port, 1))
	s.waitApplied(b, gw, 2)
	servesLast(b, port, n)
	updated := procMem(b, pid)
	time.Sleep(3 * time.Second)
	updatedSettled := procMem(b, pid)
	mib := func(kib int) float64 { return float64(kib) / 1024 }
	b.ReportMetric(mib(idle.rss), "idle-rss-MiB")
	b.ReportMetric(mib(loaded.rss), "rss-MiB")
	b.ReportMetric(mib(loaded.anon), "anon-MiB")
	b.ReportMetric(mib(settled.rss), "rss-settled-MiB")
	b.ReportMetric(mib(settled.anon), "anon-settled-MiB")
	b.ReportMetric(mib(loaded.hwm), "hwm-MiB")
	b.ReportMetric(mib(updated.hwm), "hwm-update-MiB")
	b.ReportMetric(mib(updatedSettled.rss), "rss-update-settled-MiB")
}

// proxyBinary is cmd/coxswain built into a temporary directory, or a fresh copy there of
// $COXSWAIN_BIN (so that two builds compared start from the same page-cache state).
func proxyBinary(b *testing.B) string {
	path := filepath.Join(b.TempDir(), "coxswain")
	cmd := exec.Command("go", "build", "-o", path, "github.com/coxswain-labs/coxswain/cmd/coxswain")
	if src := os.Getenv("COXSWAIN_BIN"); src != "" {
		cmd = exec.Command("cp", src, path)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("%s: %v\n%s", cmd, err, out)
	}
	return path
}

// startProxyProcess runs `coxswain proxy` as a shared proxy of s and returns its pid; it is killed
// when the benchmark ends.
func startProxyProcess(b testing.TB, bin string, s *testServer, node string) int {
	b.Helper()
	token := filepath.Join(b.TempDir(), "token")
	if err := os.WriteFile(token, []byte("shared-token\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	var out strings.Builder
	cmd := exec.Command(bin, "proxy", "--discovery-address", s.addr, "--token-file", token, "--trust-bundle", s.bundle,
		"--node-name", node, "--admin-address", "", "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Env = append(os.Environ(), "GOMAXPROCS=2")
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		if b.Failed() {
			b.Logf("proxy output:\n%s", out.String())
		}
	})
	return cmd.Process.Pid
}

// servesLast checks that the last route answers through the proxy on port.
func servesLast(b testing.TB, port uint32, n int) {
	b.Helper()
	req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/api/x", port), nil)
	req.Host = fmt.Sprintf("r%d.example.com", n-1)
	eventually(b, "the last route serves", func() error {
		res, err := httpClient.Do(req)
		if err != nil {
			return err
		}
		_ = res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", res.StatusCode)
		}
		return nil
	})
}

// memKiB is a process's resident set (VmRSS), its anonymous part (RssAnon: heap, stacks; the
// rest is the binary's pages) and its peak (VmHWM), in KiB.
type memKiB struct{ rss, anon, hwm int }

func procMem(b testing.TB, pid int) memKiB {
	b.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	var m memKiB
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		switch k {
		case "VmRSS":
			m.rss = n
		case "RssAnon":
			m.anon = n
		case "VmHWM":
			m.hwm = n
		}
	}
	return m
}

func freeLoopbackPort(b testing.TB) uint32 {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return uint32(ln.Addr().(*net.TCPAddr).Port)
}

// footprintSnapshot translates a Gateway listening on 127.0.0.1:port with n HTTPRoutes r<i>
// (hostname r<i>.example.com, one rule PathPrefix /api). The last route's backend is the real
// backend at host:bport; with perRoute every other route has its own Service whose endpoint is a
// distinct (unserved) loopback port, otherwise they all share the real one. gen > 0 moves one
// unserved endpoint, so the snapshot differs.
func footprintSnapshot(b testing.TB, n int, perRoute bool, host string, bport, port uint32, gen int) *irv1.Snapshot {
	b.Helper()
	s := footprintStore(n, perRoute, host, bport, gen)
	res := translator.Translate(context.Background(), s, translator.Options{Registry: fullRegistry, AllowLoopbackEndpoints: true})
	snap := res.Snapshot
	if len(snap.GetListeners()) != 1 || len(res.Problems) > 0 {
		b.Fatalf("footprint translation: %d listeners, problems %v", len(snap.GetListeners()), res.Problems)
	}
	snap.Listeners[0].Address, snap.Listeners[0].Port = "127.0.0.1", port
	if err := irv1.Seal(snap); err != nil {
		b.Fatal(err)
	}
	return snap
}

func footprintStore(n int, perRoute bool, host string, bport uint32, gen int) *translator.Store {
	ns := "bench"
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: ns, Name: name, Generation: int64(1 + gen), CreationTimestamp: metav1.NewTime(time.Unix(1, 0))}
	}
	s := &translator.Store{
		GatewayClasses: []*gwapiv1.GatewayClass{{ObjectMeta: metav1.ObjectMeta{Name: "coxswain", Generation: 1},
			Spec: gwapiv1.GatewayClassSpec{ControllerName: translator.DefaultControllerName}}},
		Gateways: []*gwapiv1.Gateway{{ObjectMeta: meta("gw"), Spec: gwapiv1.GatewaySpec{GatewayClassName: "coxswain",
			Listeners: []gwapiv1.Listener{{Name: "http", Port: 8080, Protocol: gwapiv1.HTTPProtocolType}}}}},
		Namespaces: []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: ns}}},
	}
	service := func(name string, epPort uint32) {
		s.Services = append(s.Services, &corev1.Service{ObjectMeta: meta(name), Spec: corev1.ServiceSpec{
			ClusterIP: "10.0.0.10", Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}})
		ready := true
		pname, pnum := "http", int32(epPort)
		slice := &discoveryv1.EndpointSlice{ObjectMeta: meta(name), AddressType: discoveryv1.AddressTypeIPv4,
			Ports:     []discoveryv1.EndpointPort{{Name: &pname, Port: &pnum}},
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{host}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}}}
		slice.Labels = map[string]string{discoveryv1.LabelServiceName: name}
		s.EndpointSlices = append(s.EndpointSlices, slice)
	}
	service("be", bport)
	prefix := gwapiv1.PathMatchPathPrefix
	path := "/api"
	port := gwapiv1.PortNumber(80)
	for i := range n {
		svc := "be"
		if perRoute && i < n-1 {
			svc = fmt.Sprintf("be-%d", i)
			epPort := uint32(20000 + i)
			if i == 0 {
				epPort += uint32(gen) * 40000
			}
			service(svc, epPort)
		}
		r := &gwapiv1.HTTPRoute{ObjectMeta: meta(fmt.Sprintf("r%d", i))}
		r.Spec.ParentRefs = []gwapiv1.ParentReference{{Name: "gw"}}
		r.Spec.Hostnames = []gwapiv1.Hostname{gwapiv1.Hostname(fmt.Sprintf("r%d.example.com", i))}
		r.Spec.Rules = []gwapiv1.HTTPRouteRule{{
			Matches: []gwapiv1.HTTPRouteMatch{{Path: &gwapiv1.HTTPPathMatch{Type: &prefix, Value: &path}}},
			BackendRefs: []gwapiv1.HTTPBackendRef{{BackendRef: gwapiv1.BackendRef{
				BackendObjectReference: gwapiv1.BackendObjectReference{Name: gwapiv1.ObjectName(svc), Port: &port}}}},
		}}
		s.Add(translatortest.HTTPRoute, r)
	}
	return s
}

// BenchmarkProxyTableHeap is the in-process companion of BenchmarkProxyFootprint: the heap a proxy
// keeps live after decoding a pushed snapshot (as the agent does) and applying it, measured after
// a GC, per route and in total, and the bytes allocated on the way (the build's garbage). Set
// COXSWAIN_HEAP_PROFILE=<file> to write a heap profile while the table is live (inspect it with
// go tool pprof -sample_index=inuse_space, or alloc_space for the build's allocations).
func BenchmarkProxyTableHeap(b *testing.B) {
	if os.Getenv("COXSWAIN_HEAP_PROFILE") != "" {
		defer func(rate int) { runtime.MemProfileRate = rate }(runtime.MemProfileRate)
		runtime.MemProfileRate = 1 // every allocation, not a sample
	}
	for _, shape := range []string{"shared", "per-route"} {
		for _, n := range []int{1000, 10000} {
			b.Run(fmt.Sprintf("cluster=%s/routes=%d", shape, n), func(b *testing.B) {
				host, bport := backendServer(b, "be")
				snap := footprintSnapshot(b, n, shape == "per-route", host, bport, 0, 0)
				raw, err := proto.Marshal(snap)
				if err != nil {
					b.Fatal(err)
				}
				var live, alloc uint64
				for b.Loop() {
					l, a := tableHeap(b, raw)
					live, alloc = max(live, l), max(alloc, a)
				}
				b.ReportMetric(float64(live)/(1<<20), "live-MiB")
				b.ReportMetric(float64(live)/float64(n), "live-B/route")
				b.ReportMetric(float64(alloc)/(1<<20), "alloc-MiB")
				b.ReportMetric(float64(len(raw))/(1<<20), "snapshot-MiB")
			})
		}
	}
}

// tableHeap decodes raw, applies it to a fresh proxy and returns the heap still live afterwards
// (the proxy holds nothing else) and the bytes allocated meanwhile.
func tableHeap(b *testing.B, raw []byte) (live, alloc uint64) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	px := proxy.New(proxy.Options{Log: logger(b), Registry: fullRegistry})
	snap := &irv1.Snapshot{}
	if err := proto.Unmarshal(raw, snap); err != nil {
		b.Fatal(err)
	}
	if err := px.Apply(context.Background(), snap); err != nil {
		b.Fatal(err)
	}
	// snap is dead from here on (the compiler's liveness), so the collection below frees it.
	runtime.GC()
	runtime.ReadMemStats(&after)
	if f := os.Getenv("COXSWAIN_HEAP_PROFILE"); f != "" {
		out, err := os.Create(f)
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.Lookup("heap").WriteTo(out, 0); err != nil {
			b.Fatal(err)
		}
		_ = out.Close()
	}
	if err := px.Close(context.Background()); err != nil {
		b.Fatal(err)
	}
	return after.HeapAlloc - before.HeapAlloc, after.TotalAlloc - before.TotalAlloc
}
