package integration

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller"
	"github.com/coxswain-labs/coxswain/controller/provision"
	"github.com/coxswain-labs/coxswain/test/integration/env"
)

// provisionPorts is the internal port range of these tests: the in-process proxy binds in it.
var provisionPorts = provision.PortRange{First: 28100, Last: 28199}

func startProvisioningController(t *testing.T, e *env.Env, identity string) *runningController {
	return startController(t, e, controllerOpts{identity: identity, noAddress: true, addresses: []string{},
		provisioning: &controller.Provisioning{Ports: provisionPorts, ProxyNamespace: controllerNS}})
}

func infraGateway(t *testing.T, e *env.Env, ns, name string, infra *gwapiv1.GatewayInfrastructure, addrs []gwapiv1.GatewaySpecAddress, listeners ...gwapiv1.Listener) *gwapiv1.Gateway {
	t.Helper()
	gw, err := e.Gateway.GatewayV1().Gateways(ns).Create(ctxFor(t), &gwapiv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       gwapiv1.GatewaySpec{GatewayClassName: "coxswain", Listeners: listeners, Infrastructure: infra, Addresses: addrs},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return gw
}

// waitService waits until the Gateway's VIP Service passes check.
func waitService(t *testing.T, e *env.Env, ns, gateway string, check func(*corev1.Service) error) *corev1.Service {
	t.Helper()
	var svc *corev1.Service
	eventually(t, "VIP Service of "+ns+"/"+gateway, func() (err error) {
		svc, err = e.Kube.CoreV1().Services(ns).Get(ctxFor(t), gateway+"-coxswain", metav1.GetOptions{})
		if err != nil {
			return err
		}
		return check(svc)
	})
	return svc
}

func subset(got, want map[string]string) error {
	for k, v := range want {
		if got[k] != v {
			return fmt.Errorf("%s=%q, want %q (have %v)", k, got[k], v, got)
		}
	}
	return nil
}

func ownedByGateway(obj metav1.Object, gw *gwapiv1.Gateway) error {
	for _, r := range obj.GetOwnerReferences() {
		if r.UID == gw.UID && r.Kind == "Gateway" && r.Controller != nil && *r.Controller {
			return nil
		}
	}
	return fmt.Errorf("%s has owner references %v, none the controlling Gateway %s", obj.GetName(), obj.GetOwnerReferences(), gw.Name)
}

func targetPort(svc *corev1.Service, port int32) int {
	for _, p := range svc.Spec.Ports {
		if p.Port == port {
			return p.TargetPort.IntValue()
		}
	}
	return 0
}

// TestSharedProvisioning runs the controller in shared mode with its in-process proxy as the
// shared pool. Two Gateways both listen on :80; each gets a VIP Service of its own carrying its
// infrastructure labels and annotations (a reserved key dropped, with a message), an identity
// ServiceAccount, and a distinct internal port that the proxy really serves it on. status.addresses
// follows the Service (cluster IP, then load-balancer ingress). Deleted and edited Services are
// repaired, a new leader keeps every internal port, and a foreign Service of the same name is a
// condition, never overwritten.
func TestSharedProvisioning(t *testing.T) {
	e := env.Start(t)
	ctrl := startProvisioningController(t, e, "first")
	ns := namespace(t, e, "shared", nil)
	startBackend(t, "v1", "10.99.62.1:8080")
	startBackend(t, "v2", "10.99.62.2:8080")
	createService(t, e, ns, "v1", "10.99.62.1")
	createService(t, e, ns, "v2", "10.99.62.2")
	createClass(t, e, "coxswain", "")

	a := infraGateway(t, e, ns, "a", &gwapiv1.GatewayInfrastructure{
		Labels:      map[gwapiv1.LabelKey]gwapiv1.LabelValue{"team": "a", provision.LabelName: "evil"},
		Annotations: map[gwapiv1.AnnotationKey]gwapiv1.AnnotationValue{"example.com/cost-center": "42"},
	}, nil, httpListener("http", 80))
	b := infraGateway(t, e, ns, "b", &gwapiv1.GatewayInfrastructure{
		Labels: map[gwapiv1.LabelKey]gwapiv1.LabelValue{"team": "b"},
	}, nil, httpListener("http", 80))
	createRoute(t, e, httpRoute(ns, "ra", []gwapiv1.ParentReference{parentRef(ns, "a")}, nil, prefixRule("/", backendRef("v1", 1))))
	createRoute(t, e, httpRoute(ns, "rb", []gwapiv1.ParentReference{parentRef(ns, "b")}, nil, prefixRule("/", backendRef("v2", 1))))

	vip := func(gw *gwapiv1.Gateway, labels, annotations map[string]string) *corev1.Service {
		return waitService(t, e, ns, gw.Name, func(svc *corev1.Service) error {
			if err := ownedByGateway(svc, gw); err != nil {
				return err
			}
			// No selector: the shared pool runs in another namespace, the controller writes the
			// endpoints.
			if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || len(svc.Spec.Selector) != 0 {
				return fmt.Errorf("type %s selector %v", svc.Spec.Type, svc.Spec.Selector)
			}
			if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 80 || !inRange(targetPort(svc, 80)) {
				return fmt.Errorf("ports %+v: want 80 → an internal port", svc.Spec.Ports)
			}
			if err := subset(svc.Labels, labels); err != nil {
				return err
			}
			return subset(svc.Annotations, annotations)
		})
	}
	reservedWin := map[string]string{"team": "a", provision.LabelName: "coxswain", provision.LabelGatewayName: "a", provision.LabelManagedBy: "coxswain"}
	svcA := vip(a, reservedWin, map[string]string{"example.com/cost-center": "42"})
	svcB := vip(b, map[string]string{"team": "b", provision.LabelGatewayName: "b"}, nil)
	portA, portB := targetPort(svcA, 80), targetPort(svcB, 80)
	if portA == portB {
		t.Fatalf("both Gateways got internal port %d", portA)
	}
	for _, gw := range []*gwapiv1.Gateway{a, b} {
		eventually(t, "ServiceAccount of "+gw.Name, func() error {
			sa, err := e.Kube.CoreV1().ServiceAccounts(ns).Get(ctxFor(t), gw.Name+"-coxswain", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if err := ownedByGateway(sa, gw); err != nil {
				return err
			}
			return subset(sa.Labels, map[string]string{"team": gw.Name, provision.LabelGatewayName: gw.Name})
		})
	}

	// Each Gateway is served on its own internal port; status publishes its Service's cluster IP.
	servedAt(t, gatewayIP, portA, "any.example", "/", 200, "v1")
	servedAt(t, gatewayIP, portB, "any.example", "/", 200, "v2")
	waitGateway(t, e, ns, "a", func(gw *gwapiv1.Gateway) error {
		if err := checkConds(gw.Status.Conditions, gw.Generation, accepted, programmed); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(gw.Status.Conditions, "Accepted"); !strings.Contains(c.Message, "labels."+provision.LabelName) {
			return fmt.Errorf("Accepted message %q names no dropped reserved key", c.Message)
		}
		return statusAddresses(gw, svcA.Spec.ClusterIP)
	})

	t.Run("the VIP Services' endpoints are the shared pool's pods", func(t *testing.T) {
		// The pool is in the controller's namespace and the Services in their Gateways': the
		// controller writes each Service's EndpointSlice, at its targetPorts, ready as the pods.
		waitVIPEndpoints(t, e, a, map[string]bool{})
		if _, err := e.Kube.CoreV1().Namespaces().Create(ctxFor(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: controllerNS}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		sharedPoolPod(t, e, controllerNS, "proxy-1", "10.244.0.11", true)
		sharedPoolPod(t, e, controllerNS, "proxy-2", "10.244.0.12", false)
		proxyPod(t, e, ns, "not-the-pool", sharedPoolLabels) // the pool's labels in another namespace
		setPodStatus(t, e, ns, "not-the-pool", "10.244.0.99", true)
		proxyPod(t, e, controllerNS, "not-a-proxy", map[string]string{provision.LabelName: "coxswain", provision.LabelComponent: "controller"})
		setPodStatus(t, e, controllerNS, "not-a-proxy", "10.244.0.98", true)
		for _, gw := range []*gwapiv1.Gateway{a, b} {
			waitVIPEndpoints(t, e, gw, map[string]bool{"10.244.0.11": true, "10.244.0.12": false})
		}
		// Readiness follows the pods' Ready condition.
		setPodStatus(t, e, controllerNS, "proxy-2", "10.244.0.12", true)
		setPodStatus(t, e, controllerNS, "proxy-1", "10.244.0.11", false)
		for _, gw := range []*gwapiv1.Gateway{a, b} {
			waitVIPEndpoints(t, e, gw, map[string]bool{"10.244.0.11": false, "10.244.0.12": true})
		}
		// A deleted pod leaves them.
		if err := e.Kube.CoreV1().Pods(controllerNS).Delete(ctxFor(t), "proxy-1", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitVIPEndpoints(t, e, b, map[string]bool{"10.244.0.12": true})
		// An edited EndpointSlice is repaired.
		es := waitVIPEndpoints(t, e, a, map[string]bool{"10.244.0.12": true})
		slices := e.Kube.DiscoveryV1().EndpointSlices(ns)
		es = editLatest(t, func() (*discoveryv1.EndpointSlice, error) { return slices.Get(ctxFor(t), es.Name, metav1.GetOptions{}) },
			func(es *discoveryv1.EndpointSlice) {
				es.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{"192.0.2.1"}}}
			},
			func(es *discoveryv1.EndpointSlice) (*discoveryv1.EndpointSlice, error) {
				return slices.Update(ctxFor(t), es, metav1.UpdateOptions{})
			})
		eventually(t, "the edited EndpointSlice repaired", func() error {
			got, err := e.Kube.DiscoveryV1().EndpointSlices(ns).Get(ctxFor(t), es.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got.ResourceVersion == es.ResourceVersion {
				return fmt.Errorf("not edited yet")
			}
			if len(got.Endpoints) != 1 || got.Endpoints[0].Addresses[0] != "10.244.0.12" {
				return fmt.Errorf("endpoints %v", got.Endpoints)
			}
			return nil
		})
		waitVIPEndpoints(t, e, a, map[string]bool{"10.244.0.12": true})
		// A deleted one is made again.
		if err := e.Kube.DiscoveryV1().EndpointSlices(ns).Delete(ctxFor(t), es.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the deleted EndpointSlice made again", func() error {
			got, err := e.Kube.DiscoveryV1().EndpointSlices(ns).Get(ctxFor(t), es.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got.UID == es.UID {
				return fmt.Errorf("not deleted yet")
			}
			return nil
		})
		waitVIPEndpoints(t, e, a, map[string]bool{"10.244.0.12": true})
	})

	t.Run("status.addresses follows the load balancer", func(t *testing.T) {
		// The controller may have rewritten the Service since svcB was read: update the latest.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			svc, err := e.Kube.CoreV1().Services(ns).Get(ctxFor(t), svcB.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.5"}}
			_, err = e.Kube.CoreV1().Services(ns).UpdateStatus(ctxFor(t), svc, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		waitGateway(t, e, ns, "b", func(gw *gwapiv1.Gateway) error {
			if err := checkConds(gw.Status.Conditions, gw.Generation, programmed); err != nil {
				return err
			}
			return statusAddresses(gw, "203.0.113.5")
		})
	})

	t.Run("a deleted Service is made again with the same internal port", func(t *testing.T) {
		if err := e.Kube.CoreV1().Services(ns).Delete(ctxFor(t), svcA.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitService(t, e, ns, "a", func(svc *corev1.Service) error {
			if svc.UID == svcA.UID {
				return fmt.Errorf("not deleted yet")
			}
			if got := targetPort(svc, 80); got != portA {
				return fmt.Errorf("targetPort %d, want %d", got, portA)
			}
			return nil
		})
	})

	t.Run("an edited Service is repaired", func(t *testing.T) {
		svcs := e.Kube.CoreV1().Services(ns)
		editLatest(t, func() (*corev1.Service, error) { return svcs.Get(ctxFor(t), svcB.Name, metav1.GetOptions{}) },
			func(svc *corev1.Service) {
				svc.Spec.Ports[0].TargetPort = intstr.FromInt32(9999)
				svc.Spec.Selector = map[string]string{"app": "elsewhere"}
			},
			func(svc *corev1.Service) (*corev1.Service, error) {
				return svcs.Update(ctxFor(t), svc, metav1.UpdateOptions{})
			})
		waitService(t, e, ns, "b", func(svc *corev1.Service) error {
			if got := targetPort(svc, 80); got != portB || len(svc.Spec.Selector) != 0 {
				return fmt.Errorf("targetPort %d selector %v, want %d and none", got, svc.Spec.Selector, portB)
			}
			return nil
		})
		servedAt(t, gatewayIP, portB, "any.example", "/", 200, "v2")
	})

	t.Run("a foreign Service of the name is a condition, never overwritten", func(t *testing.T) {
		foreign := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "d-coxswain"},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "mine"}, Ports: []corev1.ServicePort{{Port: 1234}}}}
		if _, err := e.Kube.CoreV1().Services(ns).Create(ctxFor(t), foreign, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		createGateway(t, e, ns, "d", "coxswain", httpListener("http", 80))
		waitGateway(t, e, ns, "d", func(gw *gwapiv1.Gateway) error {
			if err := checkConds(gw.Status.Conditions, gw.Generation, accepted, cond{"Programmed", "False", "NoResources"}); err != nil {
				return err
			}
			if c := meta.FindStatusCondition(gw.Status.Conditions, "Programmed"); !strings.Contains(c.Message, "not owned by this Gateway") {
				return fmt.Errorf("Programmed message %q", c.Message)
			}
			if len(gw.Status.Addresses) > 0 {
				return fmt.Errorf("status.addresses %v, want none", gw.Status.Addresses)
			}
			return nil
		})
		svc, err := e.Kube.CoreV1().Services(ns).Get(ctxFor(t), "d-coxswain", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if svc.Spec.Selector["app"] != "mine" || len(svc.OwnerReferences) != 0 {
			t.Fatalf("foreign Service changed: selector %v owners %v", svc.Spec.Selector, svc.OwnerReferences)
		}
	})

	t.Run("a new leader keeps every internal port", func(t *testing.T) {
		// A listener added to a after b was provisioned takes a port above b's: a new leader that
		// allocated afresh, oldest Gateway first, would give it b's port. It reads them back.
		updateGateway(t, e, ns, "a", func(gw *gwapiv1.Gateway) {
			gw.Spec.Listeners = append(gw.Spec.Listeners, httpListener("alt", 8080))
		})
		port8080 := targetPort(waitService(t, e, ns, "a", func(svc *corev1.Service) error {
			if p := targetPort(svc, 8080); p == 0 || p == portA || p == portB {
				return fmt.Errorf("8080 → %d", p)
			}
			return nil
		}), 8080)
		servedAt(t, gatewayIP, port8080, "any.example", "/", 200, "v1")
		ctrl.cancel()
		startProvisioningController(t, e, "second")
		// A Gateway created under the new leader gets a port neither of the others holds, and
		// theirs are unchanged.
		c := createGateway(t, e, ns, "c", "coxswain", httpListener("http", 80))
		svcC := vip(c, map[string]string{provision.LabelGatewayName: "c"}, nil)
		if p := targetPort(svcC, 80); p == portA || p == portB {
			t.Fatalf("Gateway c got internal port %d, held by a (%d) or b (%d)", p, portA, portB)
		}
		if p := targetPort(svcC, 80); p == port8080 {
			t.Fatalf("Gateway c got internal port %d, held by a's 8080", p)
		}
		for name, want := range map[string][2]int{"a": {80, portA}, "a ": {8080, port8080}, "b": {80, portB}} {
			svc := waitService(t, e, ns, strings.TrimSpace(name), func(*corev1.Service) error { return nil })
			if got := targetPort(svc, int32(want[0])); got != want[1] {
				t.Fatalf("Gateway %s: port %d → internal port %d after failover, want %d", name, want[0], got, want[1])
			}
		}
		servedAt(t, gatewayIP, portA, "any.example", "/", 200, "v1")
		// The new leader publishes the pool as the old one did, for the Gateways it found and the
		// one it made.
		for _, gw := range []*gwapiv1.Gateway{a, b, c} {
			waitVIPEndpoints(t, e, gw, map[string]bool{"10.244.0.12": true})
		}
		// A deleted Gateway's EndpointSlice goes with it (here, with no garbage collector, the
		// controller prunes it), the others stay.
		if err := e.Gateway.GatewayV1().Gateways(ns).Delete(ctxFor(t), b.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitVIPEndpointsGone(t, e, b)
		waitVIPEndpoints(t, e, a, map[string]bool{"10.244.0.12": true})
	})
}

func inRange(p int) bool { return p >= int(provisionPorts.First) && p <= int(provisionPorts.Last) }

// TestProvisionedStaticAddresses: in shared mode an IPAddress in spec.addresses pins the VIP
// Service's cluster IP; one the API server refuses, or two, are AddressNotUsable and nothing is
// published; a Hostname is published as is; another type is not accepted, and what was
// provisioned for the Gateway before is pruned.
func TestProvisionedStaticAddresses(t *testing.T) {
	e := env.Start(t)
	startProvisioningController(t, e, "static")
	ns := namespace(t, e, "pinned", nil)
	createClass(t, e, "coxswain", "")
	ip := func(v string) gwapiv1.GatewaySpecAddress {
		return gwapiv1.GatewaySpecAddress{Type: new(gwapiv1.IPAddressType), Value: v}
	}
	const pinned = "10.0.0.77" // inside the API server's default service range 10.0.0.0/24

	infraGateway(t, e, ns, "pinned", nil, []gwapiv1.GatewaySpecAddress{ip(pinned),
		{Type: new(gwapiv1.HostnameAddressType), Value: "gw.example.com"}}, httpListener("http", 80))
	waitService(t, e, ns, "pinned", func(svc *corev1.Service) error {
		if svc.Spec.ClusterIP != pinned || svc.Spec.Type != corev1.ServiceTypeClusterIP {
			return fmt.Errorf("type %s clusterIP %s, want ClusterIP %s", svc.Spec.Type, svc.Spec.ClusterIP, pinned)
		}
		return nil
	})
	waitGateway(t, e, ns, "pinned", func(gw *gwapiv1.Gateway) error {
		if err := checkConds(gw.Status.Conditions, gw.Generation, accepted, programmed); err != nil {
			return err
		}
		var got []string
		for _, a := range gw.Status.Addresses {
			got = append(got, string(*a.Type)+"="+a.Value)
		}
		if want := "IPAddress=" + pinned + ",Hostname=gw.example.com"; strings.Join(got, ",") != want {
			return fmt.Errorf("status.addresses %v, want %s", got, want)
		}
		return nil
	})

	notUsable := func(name string, addrs ...gwapiv1.GatewaySpecAddress) {
		t.Helper()
		infraGateway(t, e, ns, name, nil, addrs, httpListener("http", 80))
		waitGateway(t, e, ns, name, func(gw *gwapiv1.Gateway) error {
			if len(gw.Status.Addresses) > 0 {
				return fmt.Errorf("status.addresses %v, want none", gw.Status.Addresses)
			}
			return checkConds(gw.Status.Conditions, gw.Generation, accepted, cond{"Programmed", "False", "AddressNotUsable"})
		})
	}
	notUsable("rejected", ip("192.0.2.10")) // outside the service range: the API server refuses it
	notUsable("two", ip("10.0.0.78"), ip("10.0.0.79"))

	t.Run("an unsupported address type: not accepted, and its objects pruned", func(t *testing.T) {
		infraGateway(t, e, ns, "named", nil, nil, httpListener("http", 80))
		waitService(t, e, ns, "named", func(*corev1.Service) error { return nil })
		updateGateway(t, e, ns, "named", func(gw *gwapiv1.Gateway) {
			gw.Spec.Addresses = []gwapiv1.GatewaySpecAddress{{Type: new(gwapiv1.NamedAddressType), Value: "pool-a"}}
		})
		waitGateway(t, e, ns, "named", func(gw *gwapiv1.Gateway) error {
			return checkConds(gw.Status.Conditions, gw.Generation, cond{"Accepted", "False", "UnsupportedAddress"},
				cond{"Programmed", "False", "Invalid"})
		})
		eventually(t, "the VIP Service pruned", func() error {
			_, err := e.Kube.CoreV1().Services(ns).Get(ctxFor(t), "named-coxswain", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("still there (%v)", err)
		})
	})
}

// deployProvisioningRBAC runs a shared-mode controller as the manifests' controller
// ServiceAccount (TestDeployManifests applied its RBAC): it creates, repairs and prunes a
// Gateway's VIP Service and ServiceAccount with exactly those rights.
func deployProvisioningRBAC(t *testing.T, e *env.Env) {
	cfg := rest.CopyConfig(e.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: controllerSA}
	const name = "coxswain-labs.dev/shared-rbac"
	startController(t, e, controllerOpts{config: cfg, leaseNamespace: controllerNS, lease: "shared-rbac", name: name,
		noAddress: true, addresses: []string{}, provisioning: &controller.Provisioning{Ports: provisionPorts, ProxyNamespace: controllerNS}})
	ns := namespace(t, e, "shared-rbac", nil)
	createClass(t, e, "shared-rbac", name)
	gw, err := e.Gateway.GatewayV1().Gateways(ns).Create(ctxFor(t), &gwapiv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gw"},
		Spec:       gwapiv1.GatewaySpec{GatewayClassName: "shared-rbac", Listeners: []gwapiv1.Listener{httpListener("http", 80)}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc := waitService(t, e, ns, "gw", func(svc *corev1.Service) error { return ownedByGateway(svc, gw) })
	// Its EndpointSlice, from the pool's pods (a pod informer in the controller's namespace).
	sharedPoolPod(t, e, controllerNS, "rbac-proxy", "10.244.1.1", true)
	waitVIPEndpoints(t, e, gw, map[string]bool{"10.244.1.1": true})
	waitGateway(t, e, ns, "gw", func(gw *gwapiv1.Gateway) error {
		if err := checkConds(gw.Status.Conditions, gw.Generation, accepted, programmed); err != nil {
			return err
		}
		return statusAddresses(gw, svc.Spec.ClusterIP)
	})
	if err := e.Kube.CoreV1().ServiceAccounts(ns).Delete(ctxFor(t), "gw-coxswain", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the ServiceAccount made again", func() error {
		_, err := e.Kube.CoreV1().ServiceAccounts(ns).Get(ctxFor(t), "gw-coxswain", metav1.GetOptions{})
		return err
	})
	updateGateway(t, e, ns, "gw", func(gw *gwapiv1.Gateway) {
		gw.Spec.Addresses = []gwapiv1.GatewaySpecAddress{{Type: new(gwapiv1.NamedAddressType), Value: "x"}}
	})
	eventually(t, "the VIP Service pruned", func() error {
		if _, err := e.Kube.CoreV1().Services(ns).Get(ctxFor(t), "gw-coxswain", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
	waitVIPEndpointsGone(t, e, gw)
}

// TestSharedPoolOverDiscovery is the shared mode end to end with a real `coxswain proxy` process
// as the shared pool, fed over the discovery protocol: two Gateways both on :80 are bound at their
// internal ports, each serves its own routes there, and each is Programmed (the proxy bound and
// acknowledged it) with its VIP Service's cluster IP in status.addresses.
func TestSharedPoolOverDiscovery(t *testing.T) {
	e := env.Start(t)
	ctrlNS := namespace(t, e, "coxswain", nil)
	ctrl := startFleetController(t, e, "controller", ctrlNS, "--gateway-provisioning=shared", "--internal-port-range=28200-28299", "--leader-elect=false")
	ns := namespace(t, e, "pool", nil)
	startBackend(t, "v1", "10.99.63.1:8080")
	startBackend(t, "v2", "10.99.63.2:8080")
	createService(t, e, ns, "v1", "10.99.63.1")
	createService(t, e, ns, "v2", "10.99.63.2")
	createClass(t, e, "coxswain", "")
	createGateway(t, e, ns, "a", "coxswain", httpListener("http", 80))
	createGateway(t, e, ns, "b", "coxswain", httpListener("http", 80))
	createRoute(t, e, httpRoute(ns, "ra", []gwapiv1.ParentReference{parentRef(ns, "a")}, nil, prefixRule("/", backendRef("v1", 1))))
	createRoute(t, e, httpRoute(ns, "rb", []gwapiv1.ParentReference{parentRef(ns, "b")}, nil, prefixRule("/", backendRef("v2", 1))))
	files := mountProxyFiles(t, e, ctrlNS, ctrlNS, "coxswain-proxy")
	startProxyProcess(t, "p1", "", files, ctrl.discovery)

	ports := map[string]int{}
	for name, backend := range map[string]string{"a": "v1", "b": "v2"} {
		svc := waitService(t, e, ns, name, func(svc *corev1.Service) error {
			if p := targetPort(svc, 80); p < 28200 || p > 28299 {
				return fmt.Errorf("targetPort %d outside --internal-port-range", p)
			}
			return nil
		})
		ports[name] = targetPort(svc, 80)
		servedAt(t, gatewayIP, ports[name], "any.example", "/", 200, backend)
		waitGateway(t, e, ns, name, func(gw *gwapiv1.Gateway) error {
			if err := checkConds(gw.Status.Conditions, gw.Generation, accepted, programmed); err != nil {
				return err
			}
			return statusAddresses(gw, svc.Spec.ClusterIP)
		})
	}
	if ports["a"] == ports["b"] {
		t.Fatalf("both Gateways on internal port %d", ports["a"])
	}

	// The VIP Services' endpoints: the pool's pods of the controller's --namespace, at each
	// Gateway's internal ports. The proxy process stands for a pod at gatewayIP; a request sent
	// where each EndpointSlice says, as a service proxy would, reaches that Gateway's routes.
	sharedPoolPod(t, e, ctrlNS, "p1", gatewayIP, true)
	sharedPoolPod(t, e, ctrlNS, "p2", "10.99.63.99", false)
	for name, backend := range map[string]string{"a": "v1", "b": "v2"} {
		gw, err := e.Gateway.GatewayV1().Gateways(ns).Get(ctxFor(t), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		es := waitVIPEndpoints(t, e, gw, map[string]bool{gatewayIP: true, "10.99.63.99": false})
		for _, ep := range es.Endpoints {
			if *ep.Conditions.Ready {
				servedAt(t, ep.Addresses[0], int(*es.Ports[0].Port), "any.example", "/", 200, backend)
			}
		}
	}
}
