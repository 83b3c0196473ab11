package integration

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/coxswain-labs/coxswain/core/proxy/agent"
	"github.com/coxswain-labs/coxswain/test/integration/env"
)

// The chaos tests of issue 20: each keeps chaosLoad (HTTP keep-alive and new-connection
// requests, WebSockets, gRPC bidi streams, TCP streams) running through separate proxy processes
// while it breaks the control plane or the backends, and requires no failed request and no broken
// connection. Their figures are in docs/reliability.md.

// TestChaosLeaderFailover SIGKILLs the leading controller under load: no request fails, the
// standby takes the Lease, both proxies report themselves connected to it, Programmed never flips
// back, and a route created while no controller led gets a current status and is served.
func TestChaosLeaderFailover(t *testing.T) {
	e := env.Start(t)
	f := startChaosFleet(t, e, 2, 2)
	leader := holder(t, e, chaosLease, "")
	standby := map[string]string{"a": "b", "b": "a"}[leader]
	f.connectedTo(t, f.ctrls[leader].discovery)
	f.waitAttached(t, 2)
	load := startChaosLoad(t, f.targets())

	killed := time.Now()
	f.ctrls[leader].signal(syscall.SIGKILL)
	f.ctrls[leader].wait(t)
	f.addRoute(t, "during", "during.example") // while nobody leads
	holder(t, e, chaosLease, standby)
	tookOver := time.Since(killed)
	f.connectedTo(t, f.ctrls[standby].discovery)
	reconnected := time.Since(killed)
	f.routeCurrent(t, "during", "during.example")
	f.waitAttached(t, 3)
	current := time.Since(killed)
	r := load.stop()
	loadAvg(t)
	t.Logf("failover: Lease taken %s after the SIGKILL, proxies connected to the new leader after %s, "+
		"the route made during the failover served with current status after %s",
		tookOver.Round(time.Millisecond), reconnected.Round(time.Millisecond), current.Round(time.Millisecond))
	r.requireClean(t, "leader SIGKILL")
	f.programmedNeverFlipped(t)
}

// TestChaosControllerOutage kills every controller for -chaos.outage (10 s by default, 60 s for
// the documented figure) under load, then starts one again: nothing fails meanwhile, the proxies
// serve their last snapshot and say they are disconnected (/api/v1/health, the connected gauge),
// retry with backoff, and on the restart reconnect and resync (a route made during the outage is
// served, the last-sync time moves).
func TestChaosControllerOutage(t *testing.T) {
	e := env.Start(t)
	f := startChaosFleet(t, e, 1, 2)
	a := f.ctrls["a"]
	f.connectedTo(t, a.discovery)
	before := map[string]proxyHealth{}
	for _, p := range f.proxies {
		before[p.name] = health(t, p)
	}
	load := startChaosLoad(t, f.targets())

	down := time.Now()
	a.signal(syscall.SIGKILL)
	a.wait(t)
	for _, p := range f.proxies {
		eventually(t, p.name+" reports the controller lost", func() error {
			st, err := p.discoveryStatus()
			if err != nil {
				return err
			}
			if st.Connected || st.DisconnectedSince.IsZero() || st.LastError == "" {
				return fmt.Errorf("connected=%v disconnectedSince=%v lastError=%q", st.Connected, st.DisconnectedSince, st.LastError)
			}
			if st.Version != before[p.name].status.Version {
				return fmt.Errorf("serving %q, not the last good snapshot %q", st.Version, before[p.name].status.Version)
			}
			if v, err := p.metric("coxswain_proxy_discovery_connected"); err != nil || v != 0 {
				return fmt.Errorf("coxswain_proxy_discovery_connected %v (%v)", v, err)
			}
			if code, err := p.readyz(); err != nil || code != 200 {
				return fmt.Errorf("/readyz %d (%v): a disconnected proxy still serves", code, err)
			}
			return nil
		})
	}
	f.addRoute(t, "during", "during.example")      // to resync after the outage
	time.Sleep(time.Until(down.Add(*chaosOutage))) // the outage itself: the duration is the test's input
	restarted := time.Now()
	a = restartFleetController(t, e, a, "a2", f.ctrlNS, election("a2")...)
	f.connectedTo(t, a.discovery)
	reconnected := time.Since(restarted)
	f.routeCurrent(t, "during", "during.example")
	resynced := time.Since(restarted)
	r := load.stop()
	loadAvg(t)
	for _, p := range f.proxies {
		after := health(t, p)
		tries := after.reconnects - before[p.name].reconnects
		t.Logf("%s: %.0f discovery reconnect attempts during the %s outage; last sync %s after the restart",
			p.name, tries, chaosOutage, after.status.LastSync.Sub(restarted).Round(time.Millisecond))
		if tries < 2 {
			t.Errorf("%s: %.0f reconnect attempts in %s: it does not retry", p.name, tries, *chaosOutage)
		}
		// With backoff doubling from 100 ms to 5 s, a 10 s outage takes about 8 tries, not hundreds.
		if maxTries := 10 + chaosOutage.Seconds()/2; tries > maxTries {
			t.Errorf("%s: %.0f reconnect attempts in %s: no backoff", p.name, tries, *chaosOutage)
		}
		if !after.status.LastSync.After(restarted) {
			t.Errorf("%s: last sync %v is not after the restart %v", p.name, after.status.LastSync, restarted)
		}
		if v := after.lastSyncMetric; v < float64(restarted.Unix()) {
			t.Errorf("%s: coxswain_proxy_discovery_last_sync_timestamp_seconds %v is before the restart", p.name, v)
		}
	}
	t.Logf("outage: %s with no controller; proxies reconnected %s after the restart, resynced (the route made during the outage served, status current) after %s",
		*chaosOutage, reconnected.Round(time.Millisecond), resynced.Round(time.Millisecond))
	r.requireClean(t, fmt.Sprintf("%s controller outage", *chaosOutage))
	f.programmedNeverFlipped(t)
}

type proxyHealth struct {
	status         agent.Status
	reconnects     float64
	lastSyncMetric float64
}

func health(t *testing.T, p *proxyProcess) proxyHealth {
	t.Helper()
	st, err := p.discoveryStatus()
	if err != nil {
		t.Fatal(err)
	}
	h := proxyHealth{status: st}
	if h.reconnects, err = p.metric("coxswain_proxy_discovery_reconnects_total"); err != nil {
		t.Fatal(err)
	}
	if h.lastSyncMetric, err = p.metric("coxswain_proxy_discovery_last_sync_timestamp_seconds"); err != nil {
		t.Fatal(err)
	}
	return h
}

// TestChaosAPIServerRestart restarts kube-apiserver (etcd kept) under load: nothing fails, the
// controller keeps running and reconnects its watches, and a change made after the restart is
// served with a current status.
func TestChaosAPIServerRestart(t *testing.T) {
	e := env.Start(t)
	f := startChaosFleet(t, e, 1, 1)
	a := f.ctrls["a"]
	f.connectedTo(t, a.discovery)
	load := startChaosLoad(t, f.targets())

	unreachable := e.RestartAPIServer(t)
	restarted := time.Now()
	select {
	case <-a.done:
		t.Fatalf("the controller exited when the API server restarted:\n%s", tail(a.out.String(), 4000))
	default:
	}
	f.addRoute(t, "after", "after.example")
	f.routeCurrent(t, "after", "after.example")
	f.waitAttached(t, 3)
	served := time.Since(restarted)
	r := load.stop()
	loadAvg(t)
	t.Logf("API server restart: unreachable for %s; a route made after it served with current status %s later",
		unreachable.Round(time.Millisecond), served.Round(time.Millisecond))
	r.requireClean(t, "API server restart")
	f.programmedNeverFlipped(t)
}
