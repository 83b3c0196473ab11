package main

import (
	"fmt"
	"os"
	"time"
)

// bodyPath is the backend path for a body size ("12", "1k", "16k").
func bodyPath(size string) string { return "/" + size }

// measured runs load against pe while accounting the proxy's CPU time.
func (e *env) measured(pe *peer, f func() (int64, error)) (reqs int64, cpuUS float64, err error) {
	var before float64
	if pe.p != nil {
		before = cpuSeconds(pe.p.pid())
	}
	reqs, err = f()
	if err != nil || pe.p == nil || reqs == 0 {
		return reqs, 0, err
	}
	return reqs, (cpuSeconds(pe.p.pid()) - before) * 1e6 / float64(reqs), nil
}

// keepAlive is one closed-loop HTTP/1.1 keep-alive measurement of url over conns connections
// (after a second's warm-up): B1's figures, with the proxy's CPU time per request.
func (e *env) keepAlive(pe *peer, url string, conns int, headers ...string) (map[string]float64, error) {
	if _, err := e.load.wrk(e.ctx, url, conns, time.Second, headers...); err != nil {
		return nil, err
	}
	var w wrkResult
	_, cpu, err := e.measured(pe, func() (int64, error) {
		var err error
		w, err = e.load.wrk(e.ctx, url, conns, e.opts.duration, headers...)
		return w.Requests, err
	})
	if err != nil {
		return nil, err
	}
	return map[string]float64{"rps": w.rps(), "cpu_us_per_req": cpu, "p50_us": w.P50, "p99_us": w.P99,
		"errors": float64(w.errors()), "non2xx": float64(w.Status)}, nil
}

// b1 is HTTP/1.1 keep-alive throughput and CPU per request for each body size and connection count.
func (e *env) b1() error {
	names, err := e.startPeers(e.order()...)
	if err != nil {
		return err
	}
	keys := []string{"rps", "cpu_us_per_req", "p50_us", "p99_us", "errors", "non2xx"}
	for _, body := range e.opts.bodies {
		for _, c := range e.opts.conns {
			kase := fmt.Sprintf("body=%s conns=%d", body, c)
			err := e.rounds("B1", kase, names, func(pe *peer) (map[string]float64, error) {
				return e.keepAlive(pe, pe.http+bodyPath(body), c)
			})
			if err != nil {
				return err
			}
			e.res.summarize(os.Stdout, "B1", kase, names, keys)
		}
	}
	return nil
}

// b2 is the latency a proxy adds: at one connection (closed loop, wrk), and at a fixed open-loop
// rate of 30% and 70% of nginx's maximum (h2load --rps over 64 connections, percentiles from every
// request's log line). Each round measures the backend directly first, and the "added" figures are
// proxy minus direct within the round.
func (e *env) b2() error {
	names, err := e.startPeers(e.order()...)
	if err != nil {
		return err
	}
	direct := &peer{name: "direct", http: url(e.data.Ports.Backend)}
	e.peers["direct"] = direct
	defer delete(e.peers, "direct")
	all := append([]string{"direct"}, names...)

	var base map[string]float64
	kase := "conns=1"
	err = e.rounds("B2", kase, all, func(pe *peer) (map[string]float64, error) {
		u := pe.http + "/12"
		if _, err := e.load.wrk(e.ctx, u, 1, time.Second); err != nil {
			return nil, err
		}
		w, err := e.load.wrk(e.ctx, u, 1, e.opts.duration)
		if err != nil {
			return nil, err
		}
		m := map[string]float64{"p50_us": w.P50, "p99_us": w.P99, "p999_us": w.P999, "rps": w.rps(),
			"errors": float64(w.errors()), "non2xx": float64(w.Status)}
		if pe == direct {
			base = m
		} else {
			m["added_p50_us"], m["added_p99_us"] = w.P50-base["p50_us"], w.P99-base["p99_us"]
		}
		return m, nil
	})
	if err != nil {
		return err
	}
	e.res.summarize(os.Stdout, "B2", kase, all, []string{"added_p50_us", "added_p99_us", "p50_us", "p99_us", "p999_us", "errors", "non2xx"})

	// nginx's maximum at 64 connections sets the fixed rates.
	ng, ok := e.peers["nginx"]
	if !ok {
		return fmt.Errorf("the open-loop part needs the nginx peer")
	}
	var maxes []float64
	for range 3 {
		w, err := e.load.wrk(e.ctx, ng.http+"/12", 64, e.opts.duration)
		if err != nil {
			return err
		}
		maxes = append(maxes, w.rps())
	}
	nginxMax := median(maxes)
	e.res.note(os.Stdout, "B2: nginx maximum at 64 connections %.0f rps (median of 3)", nginxMax)
	for _, share := range []float64{0.3, 0.7} {
		rate := share * nginxMax
		kase := fmt.Sprintf("rate=%.0f%% of nginx max (%.0f rps) conns=64", share*100, rate)
		err := e.rounds("B2", kase, all, func(pe *peer) (map[string]float64, error) {
			r, err := e.load.h2load(e.ctx, h2opts{url: pe.http + "/12", h1: true, clients: 64, rate: rate,
				duration: e.opts.duration, latency: true})
			if err != nil {
				return nil, err
			}
			m := map[string]float64{"p99_us": r.P99, "p999_us": r.P999, "p50_us": r.P50, "rps": r.RPS,
				"failures": float64(r.failures())}
			if pe == direct {
				base = m
			} else {
				m["added_p99_us"] = r.P99 - base["p99_us"]
			}
			return m, nil
		})
		if err != nil {
			return err
		}
		e.res.summarize(os.Stdout, "B2", kase, all, []string{"p99_us", "p999_us", "p50_us", "added_p99_us", "rps", "failures"})
	}
	return nil
}
