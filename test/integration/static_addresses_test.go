package integration

import (
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/test/integration/env"
)

// TestStaticAddresses runs the controller with an address pool and a `coxswain proxy` process,
// and a Gateway that names two addresses in spec.addresses: one of the pool's range, which the
// proxy's host holds, and 192.0.2.10 (TEST-NET-1), which nothing in the namespace holds. The
// proxy serves the first and reports the second: the Gateway is Accepted but Programmed=False
// AddressNotUsable naming it. Once the spec drops it, the Gateway is Programmed and publishes
// exactly the address it named. The pool never hands the named address to another Gateway: of
// a two-address range, a Gateway that asks for none gets the other one, a third gets none.
func TestStaticAddresses(t *testing.T) {
	e := env.Start(t)
	ctrlNS := namespace(t, e, "coxswain", nil)
	const pool, pooledIP, staticIP, unusableIP = "10.99.60.0/30", "10.99.60.1", "10.99.60.2", "192.0.2.10"
	ctrl := startPoolController(t, e, ctrlNS, pool)
	ns := namespace(t, e, "static", nil)
	startBackend(t, "v1", "10.99.61.1:8080")
	createService(t, e, ns, "v1", "10.99.61.1")
	createClass(t, e, "coxswain", "")
	const port = 18740

	if _, err := e.Gateway.GatewayV1().Gateways(ns).Create(ctxFor(t), &gwapiv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "static"},
		Spec: gwapiv1.GatewaySpec{GatewayClassName: "coxswain", Listeners: []gwapiv1.Listener{httpListener("http", port)},
			Addresses: []gwapiv1.GatewaySpecAddress{{Value: staticIP}, {Value: unusableIP}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createGateway(t, e, ns, "pooled", "coxswain", httpListener("http", port))
	createRoute(t, e, httpRoute(ns, "r", []gwapiv1.ParentReference{parentRef(ns, "static"), parentRef(ns, "pooled")}, nil,
		prefixRule("/", backendRef("v1", 1))))
	files := mountProxyFiles(t, e, ctrlNS, ctrlNS, "coxswain-proxy")
	startProxyProcess(t, "p1", "", files, ctrl.discovery)

	servedAt(t, staticIP, port, "any.example", "/", 200, "v1")
	waitGateway(t, e, ns, "static", func(gw *gwapiv1.Gateway) error {
		if err := checkConds(gw.Status.Conditions, gw.Generation, cond{"Accepted", "True", "Accepted"},
			cond{"Programmed", "False", "AddressNotUsable"}); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(gw.Status.Conditions, "Programmed"); !strings.Contains(c.Message, unusableIP+" cannot be bound on proxy p1") {
			return fmt.Errorf("Programmed message %q names no %s", c.Message, unusableIP)
		}
		return nil
	})
	pooled := func(want string) {
		t.Helper()
		servedAt(t, want, port, "any.example", "/", 200, "v1")
		waitGateway(t, e, ns, "pooled", func(gw *gwapiv1.Gateway) error {
			if err := checkConds(gw.Status.Conditions, gw.Generation, programmed); err != nil {
				return err
			}
			return statusAddresses(gw, want)
		})
	}
	pooled(pooledIP)

	t.Run("without the unusable address: programmed, publishing the one it named", func(t *testing.T) {
		updateGateway(t, e, ns, "static", func(gw *gwapiv1.Gateway) {
			gw.Spec.Addresses = []gwapiv1.GatewaySpecAddress{{Value: staticIP}}
		})
		waitGateway(t, e, ns, "static", func(gw *gwapiv1.Gateway) error {
			if err := checkConds(gw.Status.Conditions, gw.Generation, accepted, programmed); err != nil {
				return err
			}
			return statusAddresses(gw, staticIP)
		})
		servedAt(t, staticIP, port, "any.example", "/", 200, "v1")
		pooled(pooledIP)
	})

	t.Run("the pool does not hand out a named address", func(t *testing.T) {
		createGateway(t, e, ns, "third", "coxswain", httpListener("http", port))
		waitGateway(t, e, ns, "third", func(gw *gwapiv1.Gateway) error {
			if len(gw.Status.Addresses) != 0 {
				return fmt.Errorf("status.addresses %v, want none", gw.Status.Addresses)
			}
			return checkConds(gw.Status.Conditions, gw.Generation, cond{"Programmed", "False", "AddressNotAssigned"})
		})
	})
}

// statusAddresses checks that gw publishes exactly the IPAddress want.
func statusAddresses(gw *gwapiv1.Gateway, want ...string) error {
	var got []string
	for _, a := range gw.Status.Addresses {
		if a.Type == nil || *a.Type != gwapiv1.IPAddressType {
			return fmt.Errorf("status.addresses %v: not all IPAddress", gw.Status.Addresses)
		}
		got = append(got, a.Value)
	}
	if !slices.Equal(got, want) {
		return fmt.Errorf("status.addresses %v, want %v", got, want)
	}
	return nil
}

// startPoolController is startFleetController with --gateway-address-pool in place of
// --status-address (the two exclude each other).
func startPoolController(t testing.TB, e *env.Env, ns, pool string) *fleetController {
	t.Helper()
	c := &fleetController{
		discovery: net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t))),
		admin:     net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t))),
	}
	args := []string{"controller", "--in-process-proxy=false", "--kubeconfig", e.WriteKubeConfig(t),
		"--gateway-address-pool", pool, "--leader-elect=false", "--namespace", ns, "--trust-domain", "integration.test",
		"--discovery-address", c.discovery, "--admin-address", c.admin, "--discovery-server-name", "127.0.0.1",
		"--health-address", "127.0.0.1:0", "--log-format", "console", "--holdoff", "20ms"}
	p := &process{name: "controller", out: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(coxswainBinary(t), args...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.signal(syscall.SIGKILL)
		<-p.done
		if t.Failed() {
			t.Logf("output of controller:\n%s", tail(p.out.String(), 8000))
		}
	})
	c.process = p
	return c
}
