package main

import (
	"fmt"
	"os"
)

// lbData is what the load-balancing benchmark adds to Coxswain's configuration: three Services
// over the same two backend endpoints (the backend's two HTTP/1.1 ports), one per algorithm, two
// of them with a CoxswainBackendPolicy.
type lbData struct {
	Ports [2]int
	// Cases are the Services, each on its own path prefix.
	Cases []lbCase
}

// lbCase is one algorithm of the lb benchmark.
type lbCase struct {
	// Name is the Service's name and the route's path prefix (/<name>/...).
	Name string
	// Algorithm is the policy's loadBalancer.algorithm; "" has no policy (round robin).
	Algorithm string
}

// lbCases are B1 with each balancer the issue measures against round robin: least_conn and a
// header hash (the load sends a fixed header value, so every request hashes the same key).
var lbCases = []lbCase{
	{Name: "lb-rr"},
	{Name: "lb-lc", Algorithm: "least_conn"},
	{Name: "lb-hh", Algorithm: "hash:header=x-user"},
}

func newLBData(p ports) *lbData {
	return &lbData{Ports: [2]int{p.Backend, p.BackendAlt}, Cases: lbCases}
}

// lb measures B1 (12-byte body, 64 keep-alive connections) through each algorithm of lbCases in
// one Coxswain process, so the figures are ratios from the same run.
func (e *env) lb() error {
	if _, err := e.startPeers("coxswain"); err != nil {
		return err
	}
	cox := e.peers["coxswain"]
	keys := []string{"rps", "cpu_us_per_req", "p50_us", "p99_us", "errors", "non2xx"}
	const conns = 64
	var names []string
	for _, c := range lbCases {
		pe := &peer{name: "coxswain-" + c.Name, http: cox.http + "/" + c.Name, p: cox.p}
		e.peers[pe.name] = pe
		defer delete(e.peers, pe.name)
		names = append(names, pe.name)
	}
	kase := fmt.Sprintf("body=12 conns=%d endpoints=2", conns)
	err := e.rounds("LB", kase, names, func(pe *peer) (map[string]float64, error) {
		return e.keepAlive(pe, pe.http+"/12", conns, "X-User: bench-user")
	})
	if err != nil {
		return err
	}
	e.res.summarize(os.Stdout, "LB", kase, names, keys)
	return nil
}
