package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingBackend is an HTTP backend that counts what reaches it: connections, requests whose
// header arrived, requests with a body that arrived whole, and the paths it saw.
type countingBackend struct {
	port     int
	conns    atomic.Int64
	requests atomic.Int64
	complete atomic.Int64
	mu       sync.Mutex
	paths    []string
}

func startCountingBackend(t *testing.T) *countingBackend {
	t.Helper()
	b := &countingBackend{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.requests.Add(1)
		b.mu.Lock()
		b.paths = append(b.paths, r.URL.Path)
		b.mu.Unlock()
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			return
		}
		if r.ContentLength != 0 {
			b.complete.Add(1)
		}
		_, _ = io.WriteString(w, "ok")
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			b.conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	b.port = srv.Listener.Addr().(*net.TCPAddr).Port
	return b
}

func (b *countingBackend) seen() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.paths...)
}

// abuseFiles are the manifests of an abuse test: an HTTP listener on httpPort (and, when
// httpsPort is not 0, an HTTPS listener on it with a certificate for abuse.example) routing
// everything to the backend (Service "be").
func abuseFiles(t *testing.T, b *countingBackend, httpPort, httpsPort int) map[string]string {
	t.Helper()
	ls := []listener{{name: "http", protocol: "HTTP", port: httpPort}}
	files := map[string]string{"class.yaml": gatewayClassYAML}
	if httpsPort != 0 {
		ls = append(ls, listener{name: "https", protocol: "HTTPS", port: httpsPort, certSecret: "cert"})
		cert, key := selfSigned(t, "abuse.example")
		files["secret.yaml"] = tlsSecretYAML("cert", cert, key)
	}
	files["gw.yaml"] = gatewayYAML(ls...)
	files["route.yaml"] = routeYAML("all", "", "  rules: [{backendRefs: [{name: be, port: 80}]}]\n")
	files["svc.yaml"] = serviceYAML(&backend{name: "be", port: b.port})
	return files
}

// awaitServed waits until a plain GET through addr reaches the backend (on connections it does
// not keep open).
func awaitServed(t *testing.T, addr string) {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	eventually(t, 20*time.Second, "route served at "+addr, func() error {
		resp, err := c.Get("http://" + addr + "/ready")
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	})
}

// peakRSS is the highest resident set size of the server process so far (VmHWM), in KiB.
func (s *server) peakRSS() int {
	s.t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		s.t.Fatalf("reading the proxy's peak RSS: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				s.t.Fatalf("VmHWM %q: %v", v, err)
			}
			return n
		}
	}
	s.t.Fatal("no VmHWM in /proc/PID/status")
	return 0
}

// abuseGrowthLimit bounds what one test's attacks may add to the server's peak RSS over the idle
// process, in KiB. The growth measured is a few MiB (docs/reliability.md, "Peak memory per
// attack"); the limit is far above it so that load and GC timing never trip it, and far below
// what an attack that memory grows with would take (a buffer kept per byte sent or per
// connection: 1 MiB headers on 200 connections are 200 MiB). The race detector's shadow memory
// multiplies the growth, hence a larger limit for a race build.
var abuseGrowthLimit = map[bool]int{false: 64 << 10, true: 256 << 10}[raceBuild]

// reportRSS logs the process's peak RSS for one attack, in the form docs/reliability.md quotes
// ("go test -v ... | grep 'peak RSS'"), and fails the test when the attacks so far grew it past
// abuseGrowthLimit.
func (s *server) reportRSS(attack string, baseline int) {
	s.t.Helper()
	peak := s.peakRSS()
	s.t.Logf("peak RSS %-28s %6d KiB (%.1f MiB; %+d KiB over the idle process)", attack, peak, float64(peak)/1024, peak-baseline)
	if peak-baseline > abuseGrowthLimit {
		s.t.Errorf("%s: peak RSS grew %d KiB over the idle process, over the %d KiB an attack may add", attack, peak-baseline, abuseGrowthLimit)
	}
}

// listenerStats returns the /stats counters of the listener on port (protocol as in the listener
// name, "HTTP", "HTTPS", "UDP").
func (s *server) listenerStats(port int, protocol string) map[string]int64 {
	s.t.Helper()
	body, code, err := s.adminGet("/stats")
	if err != nil || code != 200 {
		s.t.Fatalf("/stats: %d %v", code, err)
	}
	var stats map[string]map[string]int64
	if err := json.Unmarshal([]byte(body), &stats); err != nil {
		s.t.Fatal(err)
	}
	return stats[fmt.Sprintf("127.0.0.1:%d/%s", port, protocol)]
}

// metric returns the value of one series of /metrics (name{labels} exactly as exposed), or -1.
func (s *server) metric(series string) float64 {
	s.t.Helper()
	body, code, err := s.adminGet("/metrics")
	if err != nil || code != 200 {
		s.t.Fatalf("/metrics: %d %v", code, err)
	}
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				s.t.Fatal(err)
			}
			return f
		}
	}
	return -1
}

// rawExchange writes raw on a new connection to addr and reads responses until the server closes
// the connection (closed true) or nothing more comes within wait.
func rawExchange(t *testing.T, addr, raw string, wait time.Duration) (statuses []int, closed bool) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(wait))
	br := bufio.NewReader(c)
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			var ne net.Error
			if ok := asNetError(err, &ne); ok && ne.Timeout() {
				return statuses, false
			}
			return statuses, true
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		statuses = append(statuses, resp.StatusCode)
	}
}

func asNetError(err error, ne *net.Error) bool {
	for err != nil {
		if v, ok := err.(net.Error); ok { //nolint:errorlint // walking the chain by hand
			*ne = v
			return true
		}
		u, ok := err.(interface{ Unwrap() error }) //nolint:errorlint // walking the chain by hand
		if !ok {
			return false
		}
		err = u.Unwrap()
	}
	return false
}

// awaitClosed waits up to within for the server to close c (a read returning EOF or a reset), and
// says how long it took.
func awaitClosed(c net.Conn, within time.Duration) (time.Duration, error) {
	start := time.Now()
	_ = c.SetReadDeadline(start.Add(within))
	buf := make([]byte, 4096)
	for {
		_, err := c.Read(buf)
		if err == nil {
			continue
		}
		var ne net.Error
		if asNetError(err, &ne) && ne.Timeout() {
			return time.Since(start), fmt.Errorf("still open after %s", within)
		}
		return time.Since(start), nil
	}
}
