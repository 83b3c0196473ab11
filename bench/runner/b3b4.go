package main

import (
	"fmt"
	"os"
)

// b3 is TLS termination with the same ECDSA P-256 certificate everywhere, TLS 1.3: keep-alive
// HTTPS/1.1 and HTTP/2 requests/s (h2load, 16 connections, one stream each), and full handshakes:
// 2,000 new connections at a fixed 500/s, one request each, reporting the proxy CPU per handshake and
// the rate achieved.
func (e *env) b3() error {
	names, err := e.startPeers(e.order()...)
	if err != nil {
		return err
	}
	for _, h1 := range []bool{true, false} {
		kase := "keep-alive h2 c=16 m=1"
		if h1 {
			kase = "keep-alive https/1.1 c=16"
		}
		err := e.rounds("B3", kase, names, func(pe *peer) (map[string]float64, error) {
			o := h2opts{url: pe.https + "/12", h1: h1, clients: 16, duration: e.opts.duration}
			var r h2Result
			_, cpu, err := e.measured(pe, func() (int64, error) {
				var err error
				r, err = e.load.h2load(e.ctx, o)
				return r.Done, err
			})
			if err != nil {
				return nil, err
			}
			return map[string]float64{"rps": r.RPS, "cpu_us_per_req": cpu, "failures": float64(r.failures())}, nil
		})
		if err != nil {
			return err
		}
		e.res.summarize(os.Stdout, "B3", kase, names, []string{"rps", "cpu_us_per_req", "failures"})
	}
	kase := "full handshakes 2000 at 500/s"
	err = e.rounds("B3", kase, names, func(pe *peer) (map[string]float64, error) {
		o := h2opts{url: pe.https + "/12", h1: true, clients: 2000, requests: 2000, extra: []string{"--rate", "500"}}
		var r h2Result
		_, cpu, err := e.measured(pe, func() (int64, error) {
			var err error
			r, err = e.load.h2load(e.ctx, o)
			return r.Done, err
		})
		if err != nil {
			return nil, err
		}
		return map[string]float64{"cpu_us_per_handshake": cpu, "handshakes_per_s": r.RPS, "failures": float64(r.failures())}, nil
	})
	if err != nil {
		return err
	}
	e.res.summarize(os.Stdout, "B3", kase, names, []string{"cpu_us_per_handshake", "handshakes_per_s", "failures"})
	return nil
}

// b4 is cleartext HTTP/2 (prior knowledge) multiplexed downstream, HTTP/1.1 upstream, against the
// peers that serve h2c (nginx, Caddy): h2load 16 connections × 10 and × 100 streams.
func (e *env) b4() error {
	var names []string
	for _, n := range e.order() {
		if pe, ok := e.peers[n]; ok && pe.h2c != "" {
			names = append(names, n)
		}
	}
	if _, err := e.startPeers(names...); err != nil {
		return err
	}
	for _, m := range []int{10, 100} {
		kase := fmt.Sprintf("h2c c=16 m=%d", m)
		err := e.rounds("B4", kase, names, func(pe *peer) (map[string]float64, error) {
			o := h2opts{url: pe.h2c + "/12", clients: 16, streams: m, duration: e.opts.duration}
			var r h2Result
			_, cpu, err := e.measured(pe, func() (int64, error) {
				var err error
				r, err = e.load.h2load(e.ctx, o)
				return r.Done, err
			})
			if err != nil {
				return nil, err
			}
			return map[string]float64{"rps": r.RPS, "cpu_us_per_req": cpu, "failures": float64(r.failures())}, nil
		})
		if err != nil {
			return err
		}
		e.res.summarize(os.Stdout, "B4", kase, names, []string{"rps", "cpu_us_per_req", "failures"})
	}
	return nil
}
