package integration

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/test/integration/env"
)

// TestTCPRoute: the controller watches every route kind the build translates. A TCPRoute's
// status is written through the same writer as an HTTPRoute's, and its traffic is served.
func TestTCPRoute(t *testing.T) {
	e := env.Start(t)
	startController(t, e, controllerOpts{})
	ns := namespace(t, e, "l4", nil)
	startBackend(t, "tcp-backend", "10.99.10.1:8080")
	createService(t, e, ns, "svc", "10.99.10.1")
	createClass(t, e, "coxswain", "")
	const port = 18700
	createGateway(t, e, ns, "gw", "coxswain", gwapiv1.Listener{Name: "tcp", Port: port, Protocol: gwapiv1.TCPProtocolType})
	r := &gwapiv1.TCPRoute{}
	r.Namespace, r.Name = ns, "tcp"
	r.Spec.ParentRefs = []gwapiv1.ParentReference{parentRef(ns, "gw")}
	r.Spec.Rules = []gwapiv1.TCPRouteRule{{BackendRefs: []gwapiv1.BackendRef{{BackendObjectReference: gwapiv1.BackendObjectReference{
		Name: "svc", Port: ptr.To(gwapiv1.PortNumber(80))}}}}}
	if _, err := e.Gateway.GatewayV1().TCPRoutes(ns).Create(ctxFor(t), r, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "TCPRoute status", func() error {
		got, err := e.Gateway.GatewayV1().TCPRoutes(ns).Get(ctxFor(t), "tcp", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, p := range got.Status.Parents {
			if p.ControllerName == translator.DefaultControllerName {
				return checkConds(p.Conditions, got.Generation, accepted, resolved)
			}
		}
		return fmt.Errorf("no parent status of ours: %+v", got.Status.Parents)
	})
	waitGateway(t, e, ns, "gw", func(gw *gwapiv1.Gateway) error {
		if err := listenerConds(gw, "tcp", listenerHealthy...); err != nil {
			return err
		}
		if l, _ := listener(gw, "tcp"); l.AttachedRoutes != 1 {
			return fmt.Errorf("attachedRoutes = %d", l.AttachedRoutes)
		}
		return nil
	})
	tcpServedBy(t, port, "tcp-backend")

	t.Run("a newer TCPRoute on the same listener is shadowed, and takes over when the older goes", func(t *testing.T) {
		startBackend(t, "tcp-backend-2", "10.99.10.2:8080")
		createService(t, e, ns, "svc2", "10.99.10.2")
		// On a creation-time tie "tcp" sorts before "tcp-newer".
		newer := &gwapiv1.TCPRoute{}
		newer.Namespace, newer.Name = ns, "tcp-newer"
		newer.Spec.ParentRefs = []gwapiv1.ParentReference{parentRef(ns, "gw")}
		newer.Spec.Rules = []gwapiv1.TCPRouteRule{{BackendRefs: []gwapiv1.BackendRef{l4Ref("svc2", 80, 1)}}}
		if _, err := e.Gateway.GatewayV1().TCPRoutes(ns).Create(ctxFor(t), newer, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		l4RouteConds(t, e, "TCPRoute", ns, "tcp-newer", nil,
			accepted, resolved, cond{translator.RouteConditionConflicted, "True", translator.RouteReasonShadowed})
		l4RouteConds(t, e, "TCPRoute", ns, "tcp", []string{translator.RouteConditionConflicted}, accepted, resolved)
		waitListener(t, e, ns, "gw", "tcp", []string{"TCPRoute"}, 2, listenerHealthy...)
		tcpServedBy(t, port, "tcp-backend")

		if err := e.Gateway.GatewayV1().TCPRoutes(ns).Delete(ctxFor(t), "tcp", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		l4RouteConds(t, e, "TCPRoute", ns, "tcp-newer", []string{translator.RouteConditionConflicted}, accepted, resolved)
		waitListener(t, e, ns, "gw", "tcp", []string{"TCPRoute"}, 1, listenerHealthy...)
		tcpServedBy(t, port, "tcp-backend-2")
	})
}

// tcpServedBy waits until an HTTP request sent over a raw TCP connection to the gateway's port is
// answered by backend.
func tcpServedBy(t testing.TB, port int, backend string) {
	t.Helper()
	eventually(t, "an HTTP request through the TCP listener to "+backend, func() error {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("%s:%d", gatewayIP, port), 2*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := fmt.Fprint(c, "GET /over-tcp HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
			return err
		}
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return err
		}
		defer res.Body.Close()
		if res.StatusCode != 200 || res.Header.Get("X-Backend") != backend {
			return fmt.Errorf("got %d from %q", res.StatusCode, res.Header.Get("X-Backend"))
		}
		return nil
	})
}
