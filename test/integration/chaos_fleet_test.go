package integration

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/core/proxy/agent"
	"github.com/coxswain-labs/coxswain/modules/grpcroute/grpctest"
	"github.com/coxswain-labs/coxswain/test/integration/env"
)

// chaosOutage is how long TestChaosControllerOutage keeps every controller down. make test runs
// the short default; the figure in docs/reliability.md is of a 60 s run:
//
//	go test ./test/integration -run TestChaosControllerOutage -chaos.outage 60s
var chaosOutage = flag.Duration("chaos.outage", 10*time.Second, "how long TestChaosControllerOutage keeps the controllers down")

const (
	chaosHTTPPort = 18810
	chaosTCPPort  = 18811
	chaosLease    = "chaos"
)

// chaosFleet is the split-plane setup every chaos test runs on: controller processes on one
// Lease, separate `coxswain proxy` processes, a real kube-apiserver, and backends for every kind
// of traffic chaosLoad sends: Gateway gw with an HTTP listener (HTTPRoute web.example to Service
// web, whose backend also echoes WebSockets; GRPCRoute grpc.example to a grpc-go server) and a
// TCP listener (TCPRoute to an echo server).
type chaosFleet struct {
	e       *env.Env
	ctrlNS  string
	ns      string
	ctrls   map[string]*fleetController
	files   proxyFiles
	proxies []*proxyProcess
	events  *gatewayEvents
}

func election(id string) []string {
	return []string{"--leader-election-namespace", "default", "--leader-election-id", chaosLease,
		"--leader-election-identity", id, "--lease-duration", "4s", "--renew-deadline", "3s", "--retry-period", "500ms"}
}

// startChaosFleet starts controllers a, b, … (n of them) and proxies p1, p2, … (m of them), and
// waits until every proxy serves every kind of traffic and the Gateway is Programmed.
func startChaosFleet(t *testing.T, e *env.Env, controllers, proxies int, extra ...gwapiv1.Listener) *chaosFleet {
	t.Helper()
	f := &chaosFleet{e: e, ctrls: map[string]*fleetController{}}
	f.ctrlNS = namespace(t, e, "coxswain", nil)
	var addrs []string
	for i := range controllers {
		id := string(rune('a' + i))
		f.ctrls[id] = startFleetController(t, e, id, f.ctrlNS, election(id)...)
		addrs = append(addrs, f.ctrls[id].discovery)
	}
	f.ns = namespace(t, e, "chaos", nil)
	startChaosWeb(t, "web", "10.99.41.1:8080")
	grpctest.StartAt(t, "grpc", "10.99.41.2:8080")
	startEchoServer(t, "10.99.41.3:8080")
	createService(t, e, f.ns, "web", "10.99.41.1")
	createService(t, e, f.ns, "grpc", "10.99.41.2")
	createService(t, e, f.ns, "tcp", "10.99.41.3")
	createClass(t, e, "coxswain", "")
	f.events = watchGateways(t, e, f.ns)
	listeners := append([]gwapiv1.Listener{httpListener("http", chaosHTTPPort),
		{Name: "tcp", Port: chaosTCPPort, Protocol: gwapiv1.TCPProtocolType}}, extra...)
	createGateway(t, e, f.ns, "gw", "coxswain", listeners...)
	http := []gwapiv1.ParentReference{sectionRef(f.ns, "gw", "http")}
	createRoute(t, e, httpRoute(f.ns, "web", http, []string{"web.example"}, prefixRule("/", backendRef("web", 1))))
	g := &gwapiv1.GRPCRoute{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "grpc"}}
	g.Spec.ParentRefs = http
	g.Spec.Hostnames = []gwapiv1.Hostname{"grpc.example"}
	g.Spec.Rules = []gwapiv1.GRPCRouteRule{{BackendRefs: []gwapiv1.GRPCBackendRef{{BackendRef: gwapiv1.BackendRef{
		BackendObjectReference: gwapiv1.BackendObjectReference{Name: "grpc", Port: ptr.To(gwapiv1.PortNumber(80))}}}}}}
	if _, err := e.Gateway.GatewayV1().GRPCRoutes(f.ns).Create(ctxFor(t), g, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tcp := &gwapiv1.TCPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "tcp"}}
	tcp.Spec.ParentRefs = []gwapiv1.ParentReference{sectionRef(f.ns, "gw", "tcp")}
	tcp.Spec.Rules = []gwapiv1.TCPRouteRule{{BackendRefs: []gwapiv1.BackendRef{l4Ref("tcp", 80, 1)}}}
	if _, err := e.Gateway.GatewayV1().TCPRoutes(f.ns).Create(ctxFor(t), tcp, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.files = mountProxyFiles(t, e, f.ctrlNS, f.ctrlNS, "coxswain-proxy")
	for i := range proxies {
		name := fmt.Sprintf("p%d", i+1)
		f.proxies = append(f.proxies, startProxyProcess(t, name, fmt.Sprintf("10.99.0.%d", 41+i), f.files, strings.Join(addrs, ",")))
	}
	for _, p := range f.proxies {
		servedAt(t, p.ip, chaosHTTPPort, "web.example", "/", 200, "web")
	}
	waitGateway(t, e, f.ns, "gw", func(gw *gwapiv1.Gateway) error { return checkConds(gw.Status.Conditions, gw.Generation, programmed) })
	l4RouteConds(t, e, "TCPRoute", f.ns, "tcp", nil, accepted, resolved)
	return f
}

func (f *chaosFleet) targets() []chaosTarget {
	var out []chaosTarget
	for _, p := range f.proxies {
		out = append(out, chaosTarget{name: p.name, ip: p.ip, httpPort: chaosHTTPPort, tcpPort: chaosTCPPort})
	}
	return out
}

// programmedNeverFlipped checks the Gateway's every version seen since the fleet started:
// once Programmed=True, never anything else.
func (f *chaosFleet) programmedNeverFlipped(t *testing.T) {
	t.Helper()
	cur, err := f.e.Gateway.GatewayV1().Gateways(f.ns).Get(ctxFor(t), "gw", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	programmedOnce(t, f.events, cur.ResourceVersion)
}

// routeCurrent waits until HTTPRoute name is served by every proxy and its status is current:
// Accepted and ResolvedRefs for its latest generation.
func (f *chaosFleet) routeCurrent(t *testing.T, name, host string) {
	t.Helper()
	for _, p := range f.proxies {
		servedAt(t, p.ip, chaosHTTPPort, host, "/", 200, "")
	}
	waitRouteParent(t, f.e, f.ns, name, translator.DefaultControllerName, "http", accepted, resolved)
}

// addRoute creates HTTPRoute name for host on the HTTP listener, to Service web.
func (f *chaosFleet) addRoute(t *testing.T, name, host string) {
	t.Helper()
	createRoute(t, f.e, httpRoute(f.ns, name, []gwapiv1.ParentReference{sectionRef(f.ns, "gw", "http")}, []string{host},
		prefixRule("/", backendRef("web", 1))))
}

// attachedRoutes is the HTTP listener's attachedRoutes as the Gateway's status says now.
func (f *chaosFleet) waitAttached(t *testing.T, want int32) {
	t.Helper()
	waitGateway(t, f.e, f.ns, "gw", func(gw *gwapiv1.Gateway) error {
		l, err := listener(gw, "http")
		if err != nil {
			return err
		}
		if l.AttachedRoutes != want {
			return fmt.Errorf("http listener attachedRoutes %d, want %d", l.AttachedRoutes, want)
		}
		if c := meta.FindStatusCondition(gw.Status.Conditions, "Programmed"); c == nil || c.ObservedGeneration != gw.Generation {
			return fmt.Errorf("Programmed not current: %+v", c)
		}
		return nil
	})
}

// discoveryStatus is the discovery subsystem of a proxy's /api/v1/health.
func (p *proxyProcess) discoveryStatus() (agent.Status, error) {
	var h struct {
		Subsystems []struct {
			Name   string          `json:"name"`
			Detail json.RawMessage `json:"detail"`
		} `json:"subsystems"`
	}
	body, err := httpGet("http://" + p.admin + "/api/v1/health")
	if err != nil {
		return agent.Status{}, err
	}
	if err := json.Unmarshal([]byte(body), &h); err != nil {
		return agent.Status{}, err
	}
	for _, s := range h.Subsystems {
		if s.Name == "discovery" {
			var st agent.Status
			return st, json.Unmarshal(s.Detail, &st)
		}
	}
	return agent.Status{}, fmt.Errorf("no discovery subsystem in %s", body)
}

// metric is the value of an unlabelled series on a proxy's /metrics.
func (p *proxyProcess) metric(name string) (float64, error) {
	res, err := http.Get("http://" + p.admin + "/metrics")
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("no series %s", name)
}

// connectedTo waits until every proxy's health says it streams from the controller at addr.
func (f *chaosFleet) connectedTo(t *testing.T, addr string) {
	t.Helper()
	for _, p := range f.proxies {
		eventually(t, p.name+" connected to "+addr, func() error {
			st, err := p.discoveryStatus()
			if err != nil {
				return err
			}
			if !st.Connected || st.Controller != addr {
				return fmt.Errorf("connected=%v to %q (last error %q)", st.Connected, st.Controller, st.LastError)
			}
			if v, err := p.metric("coxswain_proxy_discovery_connected"); err != nil || v != 1 {
				return fmt.Errorf("coxswain_proxy_discovery_connected %v (%v)", v, err)
			}
			return nil
		})
	}
}

// restartFleetController starts a controller process again on the addresses of one that exited.
func restartFleetController(t *testing.T, e *env.Env, old *fleetController, name, ns string, extra ...string) *fleetController {
	t.Helper()
	return startFleetControllerAt(t, e, name, ns, old.discovery, old.admin, extra...)
}

// loadAvg is /proc/loadavg, logged next to every figure.
func loadAvg(t *testing.T) {
	t.Helper()
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		t.Logf("load average: %s", strings.TrimSpace(string(b)))
	}
}
