package proxy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/core/accesslog"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
	"github.com/coxswain-labs/coxswain/core/proxy/internal/testmod"
	"github.com/coxswain-labs/coxswain/core/proxy/listener"
	"github.com/coxswain-labs/coxswain/modules/lb/roundrobin"
)

// lineSink collects access log lines.
type lineSink struct {
	mu    sync.Mutex
	lines [][]byte
	got   chan struct{}
}

func newLineSink() *lineSink { return &lineSink{got: make(chan struct{}, 1024)} }

func (s *lineSink) Write(p []byte) (int, error) {
	for line := range bytes.Lines(p) { // the log batches lines
		s.mu.Lock()
		s.lines = append(s.lines, bytes.Clone(line))
		s.mu.Unlock()
		s.got <- struct{}{}
	}
	return len(p), nil
}

// next waits for the next line and decodes it.
func (s *lineSink) next(t *testing.T) map[string]any {
	t.Helper()
	select {
	case <-s.got:
	case <-time.After(10 * time.Second):
		t.Fatal("no access log line")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	line := s.lines[0]
	s.lines = s.lines[1:]
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatalf("access log line %q: %v", line, err)
	}
	return m
}

type observed struct {
	p   *proxy.Proxy
	reg *prometheus.Registry
	log *accesslog.Logger
}

// newObservedProxy starts a proxy with the test modules, round robin, the HTTP listener and
// extra (modules a test's routes name besides those).
func newObservedProxy(t testing.TB, metrics bool, log *accesslog.Logger, extra ...core.Module) *observed {
	t.Helper()
	reg := prometheus.NewRegistry()
	mods := append(append(testmod.Modules(), &roundrobin.RoundRobin{}, &listener.HTTP{}), extra...)
	p := proxy.New(proxy.Options{Log: testLogger(), Registry: core.NewRegistry(mods...), Metrics: reg,
		RequestMetrics: metrics, AccessLog: log})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
		log.Close(nil)
	})
	return &observed{p: p, reg: reg, log: log}
}

// TestRequestObservation sends real requests through a proxy with request metrics and the access
// log on: each is counted under its Gateway, route object, backend and status class, observed in
// the duration histogram, and logged with its fields; the series of a route the next snapshot
// drops are deleted.
func TestRequestObservation(t *testing.T) {
	be := newBackend(t, "a", nil)
	sink := newLineSink()
	o := newObservedProxy(t, true, accesslog.New(accesslog.Options{Sink: sink}))
	rt := route("httproute/ns/web/rule/0/match/0", "/", backend("a", 1))
	rt.RuleName = "hello"
	srv := server("", vhost("example.com", rt))
	srv.Sources = []string{"ns/gw/http"}
	l := httpListener(0, srv)
	apply(t, o.p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{cluster("a", be)}))
	addr := addrOf(t, o.p, l.Name)

	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/hello?token=secret", nil)
	req.Host = "example.com"
	req.Header.Set("X-Request-Id", "req-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}

	line := o.waitLine(t, sink)
	want := map[string]any{
		"msg": "request", "listener": l.Name, "gateway": "ns/gw", "route": "httproute/ns/web/rule/0/match/0",
		"rule": "hello", "backend": "a", "upstream": "127.0.0.1:" + strconv.Itoa(int(be.port)), "method": "GET", "host": "example.com", "path": "/hello",
		"protocol": "HTTP/1.1", "status": float64(200), "bytes_out": float64(len(body)),
		"client_ip": "127.0.0.1", "request_id": "req-1",
	}
	for k, v := range want {
		if line[k] != v {
			t.Errorf("access log %s = %v, want %v (line %v)", k, line[k], v, line)
		}
	}
	if _, ok := line["query"]; ok {
		t.Errorf("query logged without --access-log-query: %v", line)
	}
	for _, k := range []string{"time", "duration", "upstream_duration"} {
		if _, ok := line[k]; !ok {
			t.Errorf("access log has no %s: %v", k, line)
		}
	}
	// The upstream's try is timed (the request is logged) and inside the request's duration.
	if up, d := line["upstream_duration"].(float64), line["duration"].(float64); up <= 0 || up > d {
		t.Errorf("upstream_duration %v, duration %v: want 0 < upstream_duration <= duration", up, d)
	}

	// Unrouted: counted under route "" and logged without a route.
	resp, err = http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	line = o.waitLine(t, sink)
	if line["status"] != float64(404) || line["route"] != nil {
		t.Errorf("unrouted request logged as %v", line)
	}

	ok := o.counter(t, "ns/gw", "httproute/ns/web", "a", "2xx")
	if ok != 1 {
		t.Errorf("requests_total 2xx = %v, want 1", ok)
	}
	if n := o.counter(t, "", "", "", "4xx"); n != 1 {
		t.Errorf("unrouted 4xx = %v, want 1", n)
	}
	if n := testutil.CollectAndCount(o.reg, "coxswain_proxy_request_duration_seconds"); n != 2 {
		t.Errorf("duration histograms: %d, want 2 (the route and unrouted)", n)
	}

	// A snapshot without the route: once the old table has closed, its series are gone.
	srv2 := server("", vhost("example.com", route("httproute/ns/other/rule/0/match/0", "/", backend("a", 1))))
	srv2.Sources = []string{"ns/gw/http"}
	apply(t, o.p, snapshot(t, []*irv1.Listener{httpListener(0, srv2)}, []*irv1.Cluster{cluster("a", be)}))
	eventually(t, "the dropped route's series deleted", func() bool {
		return !strings.Contains(o.scrape(t), `route="httproute/ns/web"`)
	})
	resp, err = http.DefaultClient.Do(req) // the series are made by the first request that needs them
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if !strings.Contains(o.scrape(t), `route="httproute/ns/other"`) {
		t.Errorf("the new route has no series:\n%s", o.scrape(t))
	}
}

func (o *observed) waitLine(t *testing.T, s *lineSink) map[string]any {
	t.Helper()
	return s.next(t)
}

func (o *observed) counter(t *testing.T, gw, route, backend, class string) float64 {
	t.Helper()
	mfs, err := o.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "coxswain_proxy_requests_total" {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			want := map[string]string{"gateway": gw, "route": route, "backend": backend, "code_class": class}
			for _, lp := range m.GetLabel() {
				if want[lp.GetName()] != lp.GetValue() {
					continue metric
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return -1
}

func (o *observed) scrape(t *testing.T) string {
	t.Helper()
	mfs, err := o.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			b.WriteString(mf.GetName())
			for _, lp := range m.GetLabel() {
				b.WriteString(" " + lp.GetName() + "=\"" + lp.GetValue() + "\"")
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// blockingSink never returns from Write until released.
type blockingSink struct{ release chan struct{} }

func (s blockingSink) Write(p []byte) (int, error) {
	<-s.release
	return len(p), nil
}

// TestAccessLogSlowSinkNeverStalls serves requests while the access log's sink is blocked: every
// request is answered, and the lines that did not fit the queue are counted as dropped.
func TestAccessLogSlowSinkNeverStalls(t *testing.T) {
	be := serveFixed(t, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	sink := blockingSink{release: make(chan struct{})}
	var dropped, written atomic.Int64
	const queue, requests = 4, 50
	log := accesslog.New(accesslog.Options{Sink: sink, Queue: queue, Dropped: func() { dropped.Add(1) },
		Written: func(n int) { written.Add(int64(n)) }})
	o := newObservedProxy(t, false, log)
	released := false
	defer func() {
		if !released {
			close(sink.release) // before the cleanup's Close waits for the writer
		}
	}()
	l := httpListener(0, server("", vhost("example.com", route("r", "/", backend("fixed", 1)))))
	apply(t, o.p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{cluster("fixed", be)}))
	c, err := net.Dial("tcp", addrOf(t, o.p, l.Name))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	_ = c.SetDeadline(time.Now().Add(30 * time.Second)) // a stalled proxy fails the test, not hangs it
	for i := range requests {
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	// The writer holds the lines it buffered before its first (blocked) write; the queue holds
	// four more; every other line was dropped, and counted.
	if d := dropped.Load(); d < requests-queue-10 {
		t.Errorf("%d lines dropped, want at least %d", d, requests-queue-10)
	}
	close(sink.release)
	released = true
	log.Close(nil)
	if w, d := written.Load(), dropped.Load(); w+d != requests {
		t.Errorf("%d lines written + %d dropped, want %d", w, d, requests)
	}
}

// BenchmarkH1ProxyMetrics is BenchmarkH1ProxyAllocs with the request series on: the same
// allocations (none for metrics), and the cost of two counter/histogram updates. Like the
// benchmarks below it reports cpu-ns/op, the process's CPU time (user and system, every
// goroutine: the client, the proxy, the backend and the access log's writer) per request, which a
// loaded machine disturbs less than ns/op.
func BenchmarkH1ProxyMetrics(b *testing.B) {
	o := newObservedProxy(b, true, nil)
	benchObserved(b, o)
}

// BenchmarkH1ProxyObserveOff is BenchmarkH1ProxyMetrics with metrics and the access log off: the
// baseline of its cpu-ns/op.
func BenchmarkH1ProxyObserveOff(b *testing.B) {
	benchObserved(b, newObservedProxy(b, false, nil))
}

// BenchmarkH1ProxyAccessLog is BenchmarkH1ProxyMetrics with the access log on, written to
// io.Discard by its writer goroutine: the cost of capturing each record, and of encoding it.
func BenchmarkH1ProxyAccessLog(b *testing.B) {
	benchObserved(b, newObservedProxy(b, true, accesslog.New(accesslog.Options{Sink: io.Discard})))
}

// BenchmarkH1ProxyAccessLogOnly is BenchmarkH1ProxyAccessLog without the request metrics.
func BenchmarkH1ProxyAccessLogOnly(b *testing.B) {
	benchObserved(b, newObservedProxy(b, false, accesslog.New(accesslog.Options{Sink: io.Discard})))
}

// BenchmarkH1ProxyAccessLogFile is BenchmarkH1ProxyAccessLogOnly writing to a file, as a proxy
// does: its cpu-ns/op against BenchmarkH1ProxyObserveOff's is the log's whole cost, write(2) too.
func BenchmarkH1ProxyAccessLogFile(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "access.log"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	benchObserved(b, newObservedProxy(b, false, accesslog.New(accesslog.Options{Sink: f})))
}

// BenchmarkH1ProxyAccessLogSampledOut is BenchmarkH1ProxyAccessLogOnly with a sample rate no
// request of the run reaches: the cost of observing a request without capturing its line.
func BenchmarkH1ProxyAccessLogSampledOut(b *testing.B) {
	benchObserved(b, newObservedProxy(b, false, accesslog.New(accesslog.Options{Sink: io.Discard, Sample: 1 << 62})))
}

func benchObserved(b *testing.B, o *observed) {
	before := processCPU(b)
	benchH1ProxyOn(b, o.p, func(*irv1.Listener) {}, func(*irv1.Cluster) {}, "")
	o.log.Close(nil) // the writer's last batch counts too
	b.ReportMetric(float64(processCPU(b)-before)/float64(b.N), "cpu-ns/op")
}

// processCPU is the process's user and system CPU time so far.
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestRequestObservationAllocatesNothing holds the line the benchmarks above show: a request
// through the HTTP/1.1 fast path allocates as much with request metrics and the access log on as
// with both off.
func TestRequestObservationAllocatesNothing(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("allocation counts: not in -short, nor under -race (sync.Pool drops items there)")
	}
	off := testing.Benchmark(func(b *testing.B) {
		benchH1ProxyOn(b, newObservedProxy(b, false, nil).p, func(*irv1.Listener) {}, func(*irv1.Cluster) {}, "")
	})
	on := testing.Benchmark(func(b *testing.B) {
		o := newObservedProxy(b, true, accesslog.New(accesslog.Options{Sink: io.Discard}))
		benchH1ProxyOn(b, o.p, func(*irv1.Listener) {}, func(*irv1.Cluster) {}, "")
	})
	t.Logf("off: %d allocs/op %d B/op; on: %d allocs/op %d B/op", off.AllocsPerOp(), off.AllocedBytesPerOp(), on.AllocsPerOp(), on.AllocedBytesPerOp())
	if on.AllocsPerOp() > off.AllocsPerOp() {
		t.Errorf("observed requests allocate %d times, unobserved %d", on.AllocsPerOp(), off.AllocsPerOp())
	}
}

// TestUpstreamErrorSeries: a refused connect and an upstream that does not answer within the
// backend timeout are counted under their route, backend and reason; the series of a route are
// made by the requests that need them, so a route that answered one 200 exports one counter
// and no error series.
func TestUpstreamErrorSeries(t *testing.T) {
	ok := newBackend(t, "ok", nil)
	slow := newBackend(t, "slow", func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(300 * time.Millisecond) // past the route's 50 ms backend timeout
	})
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadBackend := &testBackend{name: "dead", port: portOf(t, dead.Addr().String())}
	_ = dead.Close() // nothing listens there now
	o := newObservedProxy(t, true, nil)
	slowRoute := route("httproute/ns/slow/rule/0/match/0", "/slow", backend("slow", 1))
	slowRoute.Timeouts = &irv1.Timeouts{BackendRequestMs: 50}
	srv := server("", vhost("example.com",
		route("httproute/ns/dead/rule/0/match/0", "/dead", backend("dead", 1)),
		slowRoute,
		route("httproute/ns/ok/rule/0/match/0", "/", backend("ok", 1))))
	srv.Sources = []string{"ns/gw/http"}
	l := httpListener(0, srv)
	apply(t, o.p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{cluster("ok", ok), cluster("slow", slow), cluster("dead", deadBackend)}))
	if text := o.scrape(t); strings.Contains(text, "coxswain_proxy_requests_total") {
		t.Errorf("request series before any request:\n%s", text)
	}
	addr := addrOf(t, o.p, l.Name)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections) // before the proxy's Close, which waits for its connections
	for path, want := range map[string]int{"/": 200, "/dead": 502, "/slow": 504} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		req.Host = "example.com"
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s: status %d, want %d", path, resp.StatusCode, want)
		}
	}
	text := o.scrape(t)
	for _, want := range []string{
		`coxswain_proxy_upstream_errors_total backend="dead" gateway="ns/gw" reason="connect_refused" route="httproute/ns/dead"`,
		`coxswain_proxy_upstream_errors_total backend="slow" gateway="ns/gw" reason="timeout" route="httproute/ns/slow"`,
		`coxswain_proxy_requests_total backend="ok" code_class="2xx" gateway="ns/gw" route="httproute/ns/ok"`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("no %s in\n%s", want, text)
		}
	}
	if got := strings.Count(text, `route="httproute/ns/ok"`); got != 2 {
		t.Errorf("%d series of the route that answered one 200, want 2 (its 2xx counter and duration):\n%s", got, text)
	}
	if n := o.upstreamErrors(t); n != 2 {
		t.Errorf("%v upstream errors counted, want 2", n)
	}
}

// upstreamErrors sums coxswain_proxy_upstream_errors_total.
func (o *observed) upstreamErrors(t *testing.T) float64 {
	t.Helper()
	mfs, err := o.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() == "coxswain_proxy_upstream_errors_total" {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// TestAccessLogWithoutMetrics: with the request series off, the access log still names the
// request's Gateway, route and rule (they come from the route, not from its series).
func TestAccessLogWithoutMetrics(t *testing.T) {
	be := newBackend(t, "a", nil)
	sink := newLineSink()
	o := newObservedProxy(t, false, accesslog.New(accesslog.Options{Sink: sink, FlushInterval: time.Millisecond}))
	rt := route("httproute/ns/web/rule/0/match/0", "/", backend("a", 1))
	rt.RuleName = "hello"
	srv := server("", vhost("example.com", rt))
	srv.Sources = []string{"ns/gw/http"}
	l := httpListener(0, srv)
	apply(t, o.p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{cluster("a", be)}))
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	req, _ := http.NewRequest(http.MethodGet, "http://"+addrOf(t, o.p, l.Name)+"/x", nil)
	req.Host = "example.com"
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	line := sink.next(t)
	for k, v := range map[string]any{"gateway": "ns/gw", "route": "httproute/ns/web/rule/0/match/0", "rule": "hello", "backend": "a", "status": float64(200)} {
		if line[k] != v {
			t.Errorf("%s = %v, want %v (line %v)", k, line[k], v, line)
		}
	}
	if text := o.scrape(t); strings.Contains(text, "coxswain_proxy_requests_total") {
		t.Errorf("request series with --request-metrics=false:\n%s", text)
	}
}
