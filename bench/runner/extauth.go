package main

import (
	"fmt"
	"os"
)

// extAuthData is what the external-auth benchmark adds to Coxswain's configuration: a second
// Gateway whose every route asks an HTTP auth service first (a CoxswainExternalAuth attached to
// the Gateway). The auth service is the benchmark backend itself, which answers 200 to anything:
// the figures are the cost of one forward-auth check on the same machine, nothing of a real
// auth service's own work.
type extAuthData struct {
	// Port is the auth Gateway's listener, per Coxswain process (variants have their own).
	Port int
}

// extAuthPort is the auth Gateway's port of the Coxswain process whose admin port is adm.
func extAuthPort(adm int) int { return adm + 5 }

// extAuth measures B1 (12-byte body, 64 keep-alive connections) and the single-connection latency
// through the plain Gateway and the one with the Gateway-wide CoxswainExternalAuth, in one Coxswain
// process, so the ratios are from the same run.
func (e *env) extAuth() error {
	if _, err := e.startPeers("coxswain"); err != nil {
		return err
	}
	cox := e.peers["coxswain"]
	off := &peer{name: "coxswain-auth-off", http: cox.http, p: cox.p}
	on := &peer{name: "coxswain-auth-on", http: url(extAuthPort(e.data.Ports.CoxswainAdm)), p: cox.p}
	e.peers[off.name], e.peers[on.name] = off, on
	defer delete(e.peers, off.name)
	defer delete(e.peers, on.name)
	names := []string{off.name, on.name}
	keys := []string{"rps", "cpu_us_per_req", "p50_us", "p99_us", "errors", "non2xx"}
	kase := "body=12 conns=64"
	if err := e.rounds("EXTAUTH", kase, names, func(pe *peer) (map[string]float64, error) {
		return e.keepAlive(pe, pe.http+"/12", 64)
	}); err != nil {
		return err
	}
	e.res.summarize(os.Stdout, "EXTAUTH", kase, names, keys)
	kase = "body=12 conns=1"
	if err := e.rounds("EXTAUTH", kase, names, func(pe *peer) (map[string]float64, error) {
		return e.keepAlive(pe, pe.http+"/12", 1)
	}); err != nil {
		return fmt.Errorf("single connection: %w", err)
	}
	e.res.summarize(os.Stdout, "EXTAUTH", kase, names, keys)
	return nil
}
