package integration

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/test/integration/env"
)

// TestUDPRoute: a UDPRoute through the API server to UDP echo backends of two Services weighted
// 3:1. Many clients at once, each from its own source port: every reply comes back from the
// gateway's own address, every datagram of a client reaches the backend its first one picked
// (the session is pinned), and the clients split between the backends by weight. Statuses: the
// route and its listener, a newer UDPRoute on the same listener (shadowed), and a UDPRoute that
// names a TCP listener (not allowed there).
func TestUDPRoute(t *testing.T) {
	e := env.Start(t)
	startController(t, e, controllerOpts{})
	ns := namespace(t, e, "udp", nil)
	heavy := startUDPEcho(t, "heavy", "10.99.40.1:8053")
	light := startUDPEcho(t, "light", "10.99.40.2:8053")
	createUDPService(t, e, ns, "heavy", "10.99.40.1")
	createUDPService(t, e, ns, "light", "10.99.40.2")
	createClass(t, e, "udp", "")
	const port, tcpPort = 19100, 19101
	createGateway(t, e, ns, "gw", "udp",
		gwapiv1.Listener{Name: "udp", Port: port, Protocol: gwapiv1.UDPProtocolType},
		gwapiv1.Listener{Name: "tcp", Port: tcpPort, Protocol: gwapiv1.TCPProtocolType})
	createUDPRoute(t, e, ns, "echo", sectionRef(ns, "gw", "udp"), l4Ref("heavy", 53, 3), l4Ref("light", 53, 1))
	l4RouteConds(t, e, "UDPRoute", ns, "echo", []string{"Conflicted", "PartiallyInvalid"}, accepted, resolved)
	waitListener(t, e, ns, "gw", "udp", []string{"UDPRoute"}, 1, listenerHealthy...)

	// One client proves the route is programmed before the many start.
	eventually(t, "a datagram through the UDP listener", func() error {
		c, err := dialUDP(port)
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = udpExchange(c, "probe")
		return err
	})

	t.Run("concurrent clients, pinned sessions, weights", func(t *testing.T) {
		const clients, rounds = 64, 8
		before := heavy.sources() + light.sources()
		got := make([]string, clients)
		errs := make(chan error, clients)
		var wg sync.WaitGroup
		for i := range clients {
			wg.Go(func() {
				c, err := dialUDP(port)
				if err != nil {
					errs <- err
					return
				}
				defer c.Close()
				for j := range rounds {
					be, err := udpExchange(c, fmt.Sprintf("client %d round %d", i, j))
					if err != nil {
						errs <- fmt.Errorf("client %d: %w", i, err)
						return
					}
					if got[i] != "" && be != got[i] {
						errs <- fmt.Errorf("client %d: round %d answered by %s, earlier rounds by %s", i, j, be, got[i])
						return
					}
					got[i] = be
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		n := map[string]int{}
		for _, be := range got {
			n[be]++
		}
		t.Logf("clients per backend: %v", n)
		// Smooth weighted round robin over 64 new sessions gives 48:16; the bounds leave room for
		// sessions the probes opened.
		if n["heavy"] < 40 || n["light"] < 8 || n["heavy"]+n["light"] != clients {
			t.Errorf("clients per backend %v, want about 48 heavy and 16 light", n)
		}
		// One upstream socket per session: the backends saw one new source per client.
		if d := heavy.sources() + light.sources() - before; d != clients {
			t.Errorf("backends saw %d new source addresses, want %d", d, clients)
		}
	})
	t.Run("a newer UDPRoute on the same listener is shadowed", func(t *testing.T) {
		// On a creation-time tie "echo" sorts before "echo-late".
		createUDPRoute(t, e, ns, "echo-late", sectionRef(ns, "gw", "udp"), l4Ref("light", 53, 1))
		l4RouteConds(t, e, "UDPRoute", ns, "echo-late", nil,
			accepted, resolved, cond{translator.RouteConditionConflicted, "True", translator.RouteReasonShadowed})
		waitListener(t, e, ns, "gw", "udp", []string{"UDPRoute"}, 2, listenerHealthy...)
		// New clients still split 3:1 by the older route, never all to "light".
		seen := map[string]bool{}
		for i := range 8 {
			c, err := dialUDP(port)
			if err != nil {
				t.Fatal(err)
			}
			be, err := udpExchange(c, fmt.Sprintf("late %d", i))
			_ = c.Close()
			if err != nil {
				t.Fatal(err)
			}
			seen[be] = true
		}
		if !seen["heavy"] {
			t.Errorf("no new client reached heavy: %v", seen)
		}
	})
	t.Run("a UDPRoute naming a TCP listener is not accepted", func(t *testing.T) {
		createUDPRoute(t, e, ns, "on-tcp", sectionRef(ns, "gw", "tcp"), l4Ref("heavy", 53, 1))
		l4RouteConds(t, e, "UDPRoute", ns, "on-tcp", nil,
			cond{"Accepted", "False", string(gwapiv1.RouteReasonNotAllowedByListeners)}, resolved)
		waitListener(t, e, ns, "gw", "tcp", []string{"TCPRoute"}, 0, listenerHealthy...)
		waitListener(t, e, ns, "gw", "udp", []string{"UDPRoute"}, 2, listenerHealthy...)
	})
}

// createUDPService makes a Service with one UDP port (53 → targetPort 8053, named "dns") and one
// EndpointSlice holding addrs; backends listen on <addr>:8053/udp.
func createUDPService(t testing.TB, e *env.Env, ns, name string, addrs ...string) {
	t.Helper()
	_, err := e.Kube.CoreV1().Services(ns).Create(ctxFor(t), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{
			Name: "dns", Port: 53, TargetPort: intstr.FromInt32(8053), Protocol: corev1.ProtocolUDP,
		}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	es := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-slice",
			Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("dns"), Port: ptr.To(int32(8053)), Protocol: ptr.To(corev1.ProtocolUDP)}},
	}
	for _, a := range addrs {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{a},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	if _, err := e.Kube.DiscoveryV1().EndpointSlices(ns).Create(ctxFor(t), es, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func createUDPRoute(t testing.TB, e *env.Env, ns, name string, parent gwapiv1.ParentReference, refs ...gwapiv1.BackendRef) {
	t.Helper()
	r := &gwapiv1.UDPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	r.Spec.ParentRefs = []gwapiv1.ParentReference{parent}
	r.Spec.Rules = []gwapiv1.UDPRouteRule{{BackendRefs: refs}}
	if _, err := e.Gateway.GatewayV1().UDPRoutes(ns).Create(ctxFor(t), r, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// udpEcho is a UDP backend that answers every datagram with "<name> <datagram>" and remembers
// the source addresses it heard from.
type udpEcho struct {
	mu   sync.Mutex
	seen map[string]bool
}

func startUDPEcho(t testing.TB, name, addr string) *udpEcho {
	t.Helper()
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		t.Fatalf("backend %s: %v", name, err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	u := &udpEcho{seen: map[string]bool{}}
	go func() {
		buf := make([]byte, 2048)
		for {
			n, src, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			u.mu.Lock()
			u.seen[src.String()] = true
			u.mu.Unlock()
			_, _ = pc.WriteTo(append([]byte(name+" "), buf[:n]...), src)
		}
	}()
	return u
}

func (u *udpEcho) sources() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.seen)
}

// dialUDP opens a connected UDP socket to the gateway's port: the kernel delivers it only
// datagrams whose source is that address and port, so a reply from anywhere else is never read.
func dialUDP(port int) (*net.UDPConn, error) {
	return net.DialUDP("udp", nil, &net.UDPAddr{IP: net.ParseIP(gatewayIP), Port: port})
}

// udpExchange sends msg and returns the name of the backend whose echo of it came back. A lost
// datagram (or its lost answer) is sent again, a few times; stale echoes are skipped.
func udpExchange(c *net.UDPConn, msg string) (string, error) {
	buf := make([]byte, 2048)
	for range 5 {
		if _, err := c.Write([]byte(msg)); err != nil {
			return "", err
		}
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		for {
			n, err := c.Read(buf)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				break
			}
			if err != nil {
				return "", err
			}
			if name, echo, ok := strings.Cut(string(buf[:n]), " "); ok && echo == msg {
				return name, nil
			}
		}
	}
	return "", fmt.Errorf("no echo of %q", msg)
}
