package main

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// idleConns is how many idle connections B8 opens; HAProxy gets fewer because it needs two
// descriptors per connection and this sandbox caps a process at 20,000 descriptors.
func idleConns(name string) int {
	if name == "haproxy" {
		return 9_500
	}
	return 10_000
}

// b8 is footprint: Coxswain's RSS with 1,000 and 10,000 HTTPRoutes loaded, and every proxy's memory
// per idle keep-alive connection (RSS delta over 10,000 connections that each made one request).
func (e *env) b8() error {
	for _, n := range []int{1_000, 10_000} {
		if err := e.b8Routes(n); err != nil {
			return err
		}
	}
	for _, n := range e.order() {
		if _, err := e.startPeers(n); err != nil {
			return err
		}
		m, err := e.idle(e.peers[n])
		e.peers[n].stop()
		if err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
		e.res.add(runRow{Bench: "B8", Case: "idle connections", Proxy: n, Run: 1, LoadAvg: loadAvg(), Metrics: m})
	}
	e.res.summarize(os.Stdout, "B8", "idle connections", e.order(), []string{"kib_per_idle_conn", "rss_before_mib", "rss_after_mib", "open_failures"})
	return nil
}

// b8Routes loads n HTTPRoutes (each its own hostname, one rule, the same backend) and reports RSS
// once the snapshot serves, and how long that took.
func (e *env) b8Routes(n int) error {
	dir := filepath.Join(e.dir, fmt.Sprintf("coxswain-%d", n))
	if err := e.coxswainDir(dir, nil, nil); err != nil {
		return err
	}
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: r%d
spec:
  parentRefs:
  - name: bench
  hostnames: ["r%d.example.com"]
  rules:
  - matches:
    - path: {type: PathPrefix, value: /api}
    backendRefs:
    - name: be
      port: 80
`, i, i)
	}
	if err := os.WriteFile(filepath.Join(dir, "many.yaml"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	start := time.Now()
	p, err := e.startCoxswain(fmt.Sprintf("coxswain-%d", n), dir)
	if err != nil {
		return err
	}
	defer p.stop()
	ready := time.Since(start)
	req, _ := http.NewRequest("GET", url(e.data.Ports.CoxswainHTTP)+"/api/12", nil)
	req.Host = fmt.Sprintf("r%d.example.com", n-1)
	resp, err := probeClient.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("route %d answered %d", n-1, resp.StatusCode)
	}
	time.Sleep(3 * time.Second) // let the first GC after loading run
	rss := float64(rssKiB(p.pid())) / 1024
	kase := fmt.Sprintf("routes=%d", n)
	e.res.add(runRow{Bench: "B8", Case: kase, Proxy: "coxswain", Run: 1, LoadAvg: loadAvg(), Metrics: map[string]float64{
		"rss_mib": rss, "ready_s": ready.Seconds(),
	}})
	e.res.summarize(os.Stdout, "B8", kase, []string{"coxswain"}, []string{"rss_mib", "ready_s"})
	return nil
}

// idle opens idleConns keep-alive connections to pe, makes one request on each, leaves them idle
// and reports the RSS growth per connection.
func (e *env) idle(pe *peer) (map[string]float64, error) {
	addr := strings.TrimPrefix(pe.http, "http://")
	// Warm the proxy (upstream pool, first-request allocations) before the baseline.
	if _, err := e.load.wrk(e.ctx, pe.http+"/12", 16, time.Second); err != nil {
		return nil, err
	}
	time.Sleep(2 * time.Second)
	before := rssKiB(pe.p.pid())
	n := idleConns(pe.name)
	conns := make([]net.Conn, n)
	var failures int
	var mu sync.Mutex
	var wg sync.WaitGroup
	work := make(chan int)
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				c, err := oneRequest(addr)
				mu.Lock()
				if err != nil {
					failures++
				} else {
					conns[i] = c
				}
				mu.Unlock()
			}
		}()
	}
	for i := range conns {
		work <- i
	}
	close(work)
	wg.Wait()
	defer func() {
		for _, c := range conns {
			if c != nil {
				_ = c.Close()
			}
		}
	}()
	// Coxswain parks an idle connection (drops its buffers and the goroutine that served it) after
	// ReadHeaderTimeout, 10 s by default: measure after that, for every proxy alike.
	time.Sleep(12 * time.Second)
	after := rssKiB(pe.p.pid())
	open := n - failures
	fmt.Printf("  %s: %d idle connections, RSS %.1f → %.1f MiB\n", pe.name, open, float64(before)/1024, float64(after)/1024)
	return map[string]float64{
		"kib_per_idle_conn": float64(after-before) / float64(max(open, 1)),
		"rss_before_mib":    float64(before) / 1024, "rss_after_mib": float64(after) / 1024,
		"open_failures": float64(failures), "conns": float64(open),
	}, nil
}

// oneRequest opens a connection, makes one keep-alive request on it and returns it idle.
func oneRequest(addr string) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("GET /12 HTTP/1.1\r\nHost: bench\r\n\r\n")); err != nil {
		_ = c.Close()
		return nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReaderSize(c, 1024), nil)
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	buf := make([]byte, 64)
	for {
		if _, err := resp.Body.Read(buf); err != nil {
			break
		}
	}
	_ = resp.Body.Close()
	if resp.StatusCode != 200 {
		_ = c.Close()
		return nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	_ = c.SetDeadline(time.Time{})
	return c, nil
}
