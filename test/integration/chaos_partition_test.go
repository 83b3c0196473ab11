package integration

import (
	"flag"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/coxswain-labs/coxswain/test/integration/env"
)

// chaosPartition is how long TestChaosControllerPartition drops the controller's traffic. The
// default outlasts the proxies' gRPC keepalive (a ping after 20 s of silence, 10 s for its answer),
// so they notice the dead stream before it heals.
var chaosPartition = flag.Duration("chaos.partition", 35*time.Second, "how long TestChaosControllerPartition drops the controller's traffic")

// keepaliveNotice is the longest a proxy may take to notice a silently dead discovery stream: the
// agent's keepalive time and timeout, and slack for a loaded machine.
const keepaliveNotice = 20*time.Second + 10*time.Second + 5*time.Second

// TestChaosControllerPartition drops, with nftables inside the tests' network namespace, every
// packet to and from the controller's discovery port for -chaos.partition, under load: a network
// partition, not a crash (no RST, no FIN; the controller keeps running and writing status). The
// proxies serve their last snapshot throughout with no failed request, notice the silent stream
// by keepalive and say so (/api/v1/health, the connected gauge), and once the partition heals
// reconnect and resync: a route made during the partition, which the controller accepted but no
// proxy could receive, is served.
func TestChaosControllerPartition(t *testing.T) {
	e := env.Start(t)
	f := startChaosFleet(t, e, 1, 2)
	a := f.ctrls["a"]
	f.connectedTo(t, a.discovery)
	before := map[string]proxyHealth{}
	for _, p := range f.proxies {
		before[p.name] = health(t, p)
	}
	load := startChaosLoad(t, f.targets())
	_, port, err := net.SplitHostPort(a.discovery)
	if err != nil {
		t.Fatal(err)
	}

	cut := time.Now()
	heal := dropPort(t, port)
	f.addRoute(t, "during", "during.example")
	waitRouteParent(t, e, f.ns, "during", translatorController, "http", accepted, resolved)
	noticed := map[string]time.Duration{}
	for _, p := range f.proxies {
		d, err := untilNoticed(p, before[p.name].status.Version, cut.Add(*chaosPartition))
		switch {
		case err == nil:
			noticed[p.name] = d.Sub(cut)
		case *chaosPartition >= keepaliveNotice:
			t.Errorf("%s: the dead stream not noticed in the %s partition: %v", p.name, *chaosPartition, err)
		default:
			t.Logf("%s: the dead stream not noticed in the %s partition (shorter than the keepalive): %v", p.name, *chaosPartition, err)
		}
		if r, err := getAt(p.ip, chaosHTTPPort, "during.example", "/"); err != nil || r.status != 404 {
			t.Errorf("%s: during.example answered %d (%v) while the proxy was cut off from the controller", p.name, r.status, err)
		}
	}
	time.Sleep(time.Until(cut.Add(*chaosPartition))) // the partition itself: its length is the test's input
	heal()
	healed := time.Now()
	f.connectedTo(t, a.discovery)
	reconnected := time.Since(healed)
	f.routeCurrent(t, "during", "during.example")
	resynced := time.Since(healed)
	r := load.stop()
	loadAvg(t)
	for _, p := range f.proxies {
		after := health(t, p)
		t.Logf("%s: noticed the dead stream %s into the partition; %.0f reconnect attempts; last sync %s after the heal",
			p.name, noticed[p.name].Round(time.Millisecond), after.reconnects-before[p.name].reconnects,
			after.status.LastSync.Sub(healed).Round(time.Millisecond))
		if !after.status.LastSync.After(healed) {
			t.Errorf("%s: last sync %v is not after the heal %v", p.name, after.status.LastSync, healed)
		}
	}
	t.Logf("partition: %s with the controller's discovery port dropped; proxies reconnected %s after the heal, resynced (the route made during the partition served) after %s",
		*chaosPartition, reconnected.Round(time.Millisecond), resynced.Round(time.Millisecond))
	r.requireClean(t, fmt.Sprintf("%s controller partition", *chaosPartition))
	f.programmedNeverFlipped(t)
}

// untilNoticed polls p's health until it says it lost the controller while it still serves
// version, and returns when; an error if deadline passes first.
func untilNoticed(p *proxyProcess, version string, deadline time.Time) (time.Time, error) {
	var last error
	for time.Now().Before(deadline) {
		st, err := p.discoveryStatus()
		switch {
		case err != nil:
			last = err
		case st.Connected || st.DisconnectedSince.IsZero():
			last = fmt.Errorf("connected=%v disconnectedSince=%v", st.Connected, st.DisconnectedSince)
		case st.Version != version:
			return time.Time{}, fmt.Errorf("serving %q, not the last good snapshot %q", st.Version, version)
		default:
			if v, err := p.metric("coxswain_proxy_discovery_connected"); err != nil || v != 0 {
				last = fmt.Errorf("coxswain_proxy_discovery_connected %v (%v)", v, err)
				break
			}
			return time.Now(), nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return time.Time{}, last
}

// dropPort makes the namespace's kernel drop every TCP packet to or from port (nftables, inside
// the tests' private network namespace only) and returns the function that lifts it, which also
// runs at cleanup.
func dropPort(t *testing.T, port string) (heal func()) {
	t.Helper()
	const table = "coxswain_chaos"
	rules := fmt.Sprintf("table inet %s {\n chain out {\n  type filter hook output priority 0; policy accept;\n"+
		"  tcp dport %s drop\n  tcp sport %s drop\n }\n}\n", table, port, port)
	cmd := exec.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft: %v: %s", err, out)
	}
	healed := false
	heal = func() {
		if healed {
			return
		}
		healed = true
		if out, err := exec.Command("nft", "delete", "table", "inet", table).CombinedOutput(); err != nil {
			t.Errorf("nft delete table: %v: %s", err, out)
		}
	}
	t.Cleanup(heal)
	return heal
}
