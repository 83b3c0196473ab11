package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"
)

const (
	b7RouteChanges    = 100
	b7ListenerChanges = 20
	b7Grace           = 200 * time.Millisecond // between changes, as in howardjohn's routechange test
	b7LoadDuration    = 60 * time.Second
	b7FirstExtraPort  = 18300
)

// b7 is configuration churn under load: wrk at about half of saturation on the main route
// while the churn route flips its backend and its response header filter 100 times and an extra
// listener is added and removed 20 times (10 of each), every change awaited until it is visible
// and followed by a 200 ms grace. Every failed or non-2xx request counts. The peer reference is
// nginx: 100 `nginx -s reload` under the same kind of load.
func (e *env) b7() error {
	cox := e.peers["coxswain"]
	dir := filepath.Join(e.dir, "coxswain")
	if err := e.coxswainDir(dir, nil, churnAt(0)); err != nil {
		return err
	}
	if _, err := e.startPeers("coxswain"); err != nil {
		return err
	}
	ch := &churner{e: e, dir: dir}
	changes, err := e.churnUnderLoad(cox, "coxswain", ch.change)
	cox.stop()
	e.printPropagation(changes)
	if _, ok := e.peers["nginx"]; ok && err == nil {
		if _, err = e.startPeers("nginx"); err == nil {
			_, err = e.churnUnderLoad(e.peers["nginx"], "nginx", func(int) (time.Duration, error) {
				start := time.Now()
				return time.Since(start), e.nginxReload()
			})
		}
	}
	e.res.summarize(os.Stdout, "B7", "churn under load", []string{"coxswain", "nginx"},
		[]string{"failures", "requests", "rate_rps", "saturation_rps", "changes", "p99_us", "churn_seconds"})
	return err
}

// churner applies B7's changes to a Coxswain manifest directory.
type churner struct {
	e     *env
	dir   string
	extra []int
	gen   int
}

func churnAt(gen int) *churnState {
	c := &churnState{Backend: "be", Generation: gen, Header: (gen/2)%2 == 1}
	if gen%2 == 1 {
		c.Backend = "be-alt"
	}
	return c
}

// changeCount is how many changes the churn makes: route changes, with a listener change after
// every fifth (so 100 + 20 for Coxswain; nginx just reloads 100 times).
func changeCount(name string) int {
	if name == "coxswain" {
		return b7RouteChanges + b7ListenerChanges
	}
	return b7RouteChanges
}

// churnUnderLoad measures pe's saturation, starts wrk paced to about half of it (64 connections,
// each pausing between requests), applies the changes, waits for the load to end and records one
// B7 row. wrk reconnects when a server closes a keep-alive connection (as nginx's old workers do
// after a reload), so the load lasts through every change; a request cut by such a close counts as
// a failure. It returns each change's time to visibility.
func (e *env) churnUnderLoad(pe *peer, name string, change func(i int) (time.Duration, error)) ([]time.Duration, error) {
	sat, err := e.load.wrk(e.ctx, pe.http+"/12", 64, e.opts.duration)
	if err != nil {
		return nil, err
	}
	rate := sat.rps() / 2
	pause := max(1, int(64*1000/rate+0.5)) // ms per connection between requests
	type loadOut struct {
		r   wrkResult
		err error
	}
	done := make(chan loadOut, 1)
	go func() {
		r, err := e.load.wrkPaced(e.ctx, pe.http+"/12", 64, b7LoadDuration, pause)
		done <- loadOut{r, err}
	}()
	time.Sleep(2 * time.Second)
	start := time.Now()
	var props []time.Duration
	var changeErr error
	for i := 1; i <= changeCount(name); i++ {
		d, err := change(i)
		if err != nil {
			changeErr = fmt.Errorf("change %d: %w", i, err)
			break
		}
		props = append(props, d)
		time.Sleep(b7Grace)
	}
	churn := time.Since(start)
	out := <-done
	if out.err != nil {
		return nil, out.err
	}
	if churn+3*time.Second > b7LoadDuration {
		e.res.note(os.Stdout, "B7 %s: the churn (%s) outlasted the load", name, churn.Round(time.Millisecond))
	}
	w := out.r
	e.res.add(runRow{Bench: "B7", Case: "churn under load", Proxy: name, Run: 1, LoadAvg: loadAvg(), Metrics: map[string]float64{
		"failures": float64(w.errors() + w.Status), "requests": float64(w.Requests), "rate_rps": w.rps(),
		"saturation_rps": sat.rps(), "changes": float64(len(props)), "p99_us": w.P99, "churn_seconds": churn.Seconds(),
		"connect_errors": float64(w.Connect), "read_errors": float64(w.Read), "write_errors": float64(w.Write),
		"timeouts": float64(w.Timeout), "status_errors": float64(w.Status),
	}})
	return props, changeErr
}

var probeClient = &http.Client{Timeout: 2 * time.Second}

// change applies change i and waits until it is visible. Every sixth change is a listener change
// (odd ones add an extra listener, even ones remove it), the others route changes: 100 route
// changes and 20 listener changes in all.
func (c *churner) change(i int) (time.Duration, error) {
	e := c.e
	start := time.Now()
	if i%6 == 0 {
		k := i / 6 // 1..20
		port := b7FirstExtraPort + (k+1)/2
		c.extra = nil
		if k%2 == 1 {
			c.extra = []int{port}
		}
		if err := e.coxswainDir(c.dir, c.extra, churnAt(c.gen)); err != nil {
			return 0, err
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		if k%2 == 1 {
			err := waitHTTP(e.ctx, nil, "http://"+addr+"/12", false, 10*time.Second)
			return time.Since(start), err
		}
		return time.Since(start), waitClosed(addr, 10*time.Second)
	}
	c.gen++
	gen := c.gen
	cs := churnAt(gen)
	if err := e.coxswainDir(c.dir, c.extra, cs); err != nil {
		return 0, err
	}
	wantPort := strconv.Itoa(e.data.Ports.Backend)
	if cs.Backend == "be-alt" {
		wantPort = strconv.Itoa(e.data.Ports.BackendAlt)
	}
	wantHeader := ""
	if cs.Header {
		wantHeader = strconv.Itoa(gen)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(e.ctx, "GET", url(e.data.Ports.CoxswainHTTP)+"/12", nil)
		req.Host = "churn.example.com"
		resp, err := probeClient.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != 200 {
				return 0, fmt.Errorf("churn route answered %d", resp.StatusCode)
			}
			if resp.Header.Get("X-Backend-Port") == wantPort && resp.Header.Get("X-Churn") == wantHeader {
				return time.Since(start), nil
			}
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("route generation %d not visible after 10s (last error %v)", gen, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (e *env) printPropagation(d []time.Duration) {
	if len(d) == 0 {
		return
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	p := func(q float64) time.Duration { return s[min(len(s)-1, int(float64(len(s))*q))] }
	e.res.note(os.Stdout, "B7 coxswain: %d changes, time from file write to visible: p50 %s, p90 %s, max %s (includes the %s file-watch debounce)",
		len(s), p(0.5).Round(time.Millisecond), p(0.9).Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond), "100ms")
}
