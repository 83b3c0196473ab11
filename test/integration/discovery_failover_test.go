package integration

import (
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/test/integration/env"
)

// TestDiscoveryFailover kills the leading controller while two proxies carry traffic: no request
// fails (the proxies keep serving their snapshot), the standby takes the Lease and starts
// accepting streams, the proxies find it among the discovery addresses, the new leader's
// changes reach them, and Programmed never flips back.
func TestDiscoveryFailover(t *testing.T) {
	e := env.Start(t)
	const lease, port = "discovery-failover", 18800
	ctrlNS := namespace(t, e, "coxswain", nil)
	election := func(id string) []string {
		return []string{"--leader-election-namespace", "default", "--leader-election-id", lease,
			"--leader-election-identity", id, "--lease-duration", "4s", "--renew-deadline", "3s", "--retry-period", "500ms"}
	}
	ctrls := map[string]*fleetController{
		"a": startFleetController(t, e, "a", ctrlNS, election("a")...),
		"b": startFleetController(t, e, "b", ctrlNS, election("b")...),
	}
	addrs := ctrls["a"].discovery + "," + ctrls["b"].discovery
	ns := namespace(t, e, "failover", nil)
	startBackend(t, "be", "10.99.8.1:8080")
	createService(t, e, ns, "svc", "10.99.8.1")
	createClass(t, e, "coxswain", "")
	events := watchGateways(t, e, ns)
	createGateway(t, e, ns, "gw", "coxswain", httpListener("http", port))
	createRoute(t, e, httpRoute(ns, "one", []gwapiv1.ParentReference{parentRef(ns, "gw")}, []string{"one.example"},
		prefixRule("/", backendRef("svc", 1))))
	files := mountProxyFiles(t, e, ctrlNS, ctrlNS, "coxswain-proxy")
	proxies := []*proxyProcess{
		startProxyProcess(t, "p1", "10.99.0.31", files, addrs),
		startProxyProcess(t, "p2", "10.99.0.32", files, addrs),
	}
	for _, p := range proxies {
		servedAt(t, p.ip, port, "one.example", "/", 200, "be")
	}
	waitGateway(t, e, ns, "gw", func(gw *gwapiv1.Gateway) error { return checkConds(gw.Status.Conditions, gw.Generation, programmed) })
	leader := holder(t, e, lease, "")
	standby := map[string]string{"a": "b", "b": "a"}[leader]

	load := startLoad(proxies, port, "one.example")
	killed := time.Now()
	ctrls[leader].signal(syscall.SIGKILL)
	ctrls[leader].wait(t)
	holder(t, e, lease, standby)
	t.Logf("standby %s took the Lease %s after the kill", standby, time.Since(killed).Round(time.Millisecond))
	eventually(t, "both proxies streaming from the new leader", func() error {
		f, err := ctrls[standby].fleet()
		if err != nil {
			return err
		}
		if !f.Leader || len(f.Proxies) != 2 {
			return fmt.Errorf("fleet: leader=%v, %d proxies", f.Leader, len(f.Proxies))
		}
		for _, p := range f.Proxies {
			if p.AckedVersion != f.Version {
				return fmt.Errorf("%s acknowledged %q, not %q", p.Node, p.AckedVersion, f.Version)
			}
		}
		return nil
	})
	t.Logf("proxies reconnected to the new leader %s after the kill", time.Since(killed).Round(time.Millisecond))

	createRoute(t, e, httpRoute(ns, "two", []gwapiv1.ParentReference{parentRef(ns, "gw")}, []string{"two.example"},
		prefixRule("/", backendRef("svc", 1))))
	for _, p := range proxies {
		servedAt(t, p.ip, port, "two.example", "/", 200, "be")
	}
	sent, failed, firstErr := load.stop()
	t.Logf("%d requests during the failover, %d failed", sent, failed)
	if failed > 0 || sent < 10 {
		t.Errorf("%d of %d requests failed during the failover (first: %v)", failed, sent, firstErr)
	}
	cur, err := e.Gateway.GatewayV1().Gateways(ns).Get(ctxFor(t), "gw", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	programmedOnce(t, events, cur.ResourceVersion)
}

// load sends requests to every proxy in turn, each on a new connection, until stopped.
type load struct {
	sent, failed atomic.Int64
	mu           sync.Mutex
	firstErr     error
	done         chan struct{}
	wg           sync.WaitGroup
}

func startLoad(proxies []*proxyProcess, port int, host string) *load {
	l := &load{done: make(chan struct{})}
	l.wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-l.done:
				return
			default:
			}
			p := proxies[i%len(proxies)]
			r, err := getAt(p.ip, port, host, "/")
			l.sent.Add(1)
			if err == nil && r.status != 200 {
				err = fmt.Errorf("%s answered %d: %s", p.name, r.status, r.body)
			}
			if err != nil {
				l.failed.Add(1)
				l.mu.Lock()
				if l.firstErr == nil {
					l.firstErr = err
				}
				l.mu.Unlock()
			}
			time.Sleep(5 * time.Millisecond) // pacing, not synchronization: a steady trickle of requests
		}
	})
	return l
}

func (l *load) stop() (sent, failed int64, firstErr error) {
	close(l.done)
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sent.Load(), l.failed.Load(), l.firstErr
}
