package main

import (
	"fmt"
	"os"
	"strconv"
)

// ingressData is what the Ingress benchmark adds to Coxswain's configuration: an Ingress that
// sends every path to the backend Service be, the same as the main HTTPRoute, served on the
// implicit Ingress listener (--ingress-http-address) next to the Gateway.
type ingressData struct {
	HTTPPort, HTTPSPort int
}

// The Ingress listeners' ports (the HTTPS one is bound only if an Ingress had TLS; the flag must
// still name a port this user may bind).
const (
	ingressHTTPPort  = 18130
	ingressHTTPSPort = 18131
)

// ingressFlags are the `coxswain serve` flags that put the Ingress listeners on loopback.
func ingressFlags() []string {
	return []string{"--ingress-http-address", "127.0.0.1:" + strconv.Itoa(ingressHTTPPort),
		"--ingress-https-address", "127.0.0.1:" + strconv.Itoa(ingressHTTPSPort)}
}

// ingressBench measures B1 (12-byte body, 64 keep-alive connections) through the Ingress route
// and through the same HTTPRoute in one Coxswain process, interleaved, so the ratio is from the
// same run.
func (e *env) ingressBench() error {
	if _, err := e.startPeers("coxswain"); err != nil {
		return err
	}
	cox := e.peers["coxswain"]
	keys := []string{"rps", "cpu_us_per_req", "p50_us", "p99_us", "errors", "non2xx"}
	const conns = 64
	cases := []*peer{
		{name: "coxswain-httproute", http: cox.http, p: cox.p},
		{name: "coxswain-ingress", http: fmt.Sprintf("http://127.0.0.1:%d", ingressHTTPPort), p: cox.p},
	}
	var names []string
	for _, pe := range cases {
		e.peers[pe.name] = pe
		defer delete(e.peers, pe.name)
		names = append(names, pe.name)
	}
	kase := fmt.Sprintf("body=12 conns=%d", conns)
	err := e.rounds("INGRESS", kase, names, func(pe *peer) (map[string]float64, error) {
		return e.keepAlive(pe, pe.http+"/12", conns)
	})
	if err != nil {
		return err
	}
	e.res.summarize(os.Stdout, "INGRESS", kase, names, keys)
	return nil
}
