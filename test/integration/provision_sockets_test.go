package integration

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller"
	"github.com/coxswain-labs/coxswain/controller/discovery"
	infrav1a1 "github.com/coxswain-labs/coxswain/modules/api/infrastructure/v1alpha1"
	"github.com/coxswain-labs/coxswain/test/integration/env"
)

// servicePorts lists a Service's ports as "port/protocol->targetPort", in order.
func servicePorts(svc *corev1.Service) []string {
	var out []string
	for _, p := range svc.Spec.Ports {
		out = append(out, fmt.Sprintf("%d/%s->%s", p.Port, p.Protocol, p.TargetPort.String()))
	}
	return out
}

// socketsGateway is a Gateway with an HTTP and an HTTPS listener that admits ListenerSets of its
// namespace.
func socketsGateway(ns, name string, infra *gwapiv1.GatewayInfrastructure) *gwapiv1.Gateway {
	same := gwapiv1.NamespacesFromSame
	return &gwapiv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: gwapiv1.GatewaySpec{
		GatewayClassName: "coxswain", Infrastructure: infra,
		AllowedListeners: &gwapiv1.AllowedListeners{Namespaces: &gwapiv1.ListenerNamespaces{From: &same}},
		Listeners: []gwapiv1.Listener{httpListener("http", 80),
			httpsListener("https", 443, "web.example", gwapiv1.SecretObjectReference{Name: "cert"})},
	}}
}

// TestSharedVIPSockets: a shared Gateway's VIP Service (and the EndpointSlice the controller
// writes for it) exposes every socket the shared pool binds for it: the listeners a ListenerSet
// adds, and the UDP socket of an HTTPS listener a ClientTrafficPolicy turns HTTP/3 on for, whose
// UDP port targets the HTTPS listener's internal port (HTTP/3 is served on the same port
// number). Without the policy the UDP port goes.
func TestSharedVIPSockets(t *testing.T) {
	e := env.Start(t)
	startProvisioningController(t, e, "sockets")
	ns := namespace(t, e, "sockets", nil)
	createClass(t, e, "coxswain", "")
	tlsSecret(t, e, ns, "cert", "web.example")
	gw, err := e.Gateway.GatewayV1().Gateways(ns).Create(ctxFor(t), socketsGateway(ns, "web", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	createListenerSet(t, e, ns, "more", ns, "web",
		gwapiv1.ListenerEntry{Name: "alt", Port: 8080, Protocol: gwapiv1.HTTPProtocolType},
		gwapiv1.ListenerEntry{Name: "alt-tls", Port: 8443, Protocol: gwapiv1.HTTPSProtocolType,
			TLS: &gwapiv1.ListenerTLSConfig{Mode: ptr.To(gwapiv1.TLSModeTerminate), CertificateRefs: []gwapiv1.SecretObjectReference{{Name: "cert"}}}})
	createCTP(t, e, ns, "h3", map[string]any{"targetRefs": []any{gatewayTarget("web", "")}, "http3": map[string]any{"enabled": true}})

	svc := waitService(t, e, ns, "web", func(svc *corev1.Service) error {
		tcp := map[int32]string{}
		for _, p := range svc.Spec.Ports {
			if p.Protocol == corev1.ProtocolTCP {
				if !inRange(p.TargetPort.IntValue()) {
					return fmt.Errorf("ports %v: %d → not an internal port", servicePorts(svc), p.Port)
				}
				tcp[p.Port] = p.TargetPort.String()
			}
		}
		want := []string{
			"80/TCP->" + tcp[80], "443/TCP->" + tcp[443], "443/UDP->" + tcp[443],
			"8080/TCP->" + tcp[8080], "8443/TCP->" + tcp[8443], "8443/UDP->" + tcp[8443],
		}
		if got := servicePorts(svc); !slices.Equal(got, want) {
			return fmt.Errorf("ports %v, want %v", got, want)
		}
		return nil
	})
	// The EndpointSlice carries the same target ports (vipEndpointsMatch compares them).
	waitVIPEndpoints(t, e, gw, map[string]bool{})

	deleteObject(t, e, clientTrafficPolicyGVR, ns, "h3")
	waitService(t, e, ns, "web", func(s *corev1.Service) error {
		want := []string{"80/TCP->" + fmt.Sprint(targetPort(svc, 80)), "443/TCP->" + fmt.Sprint(targetPort(svc, 443)),
			"8080/TCP->" + fmt.Sprint(targetPort(svc, 8080)), "8443/TCP->" + fmt.Sprint(targetPort(svc, 8443))}
		if got := servicePorts(s); !slices.Equal(got, want) {
			return fmt.Errorf("ports %v, want %v (no UDP without HTTP/3, the internal ports kept)", got, want)
		}
		return nil
	})
	waitVIPEndpoints(t, e, gw, map[string]bool{})
}

// TestDedicatedServiceSockets: a dedicated Gateway's Service exposes the listeners its
// ListenerSets add and the UDP port of HTTP/3, each at the same number; its trust-bundle
// ConfigMap, HPA and PDB are repaired as soon as someone edits or deletes them (watched, not
// waiting for an unrelated change); and spec.addresses works as in shared mode: an IPAddress pins
// the Service as a ClusterIP Service (over the parameters' LoadBalancer, said in Accepted), one
// the API server refuses or two are AddressNotUsable (the refusal logged once at WARN and named
// in the condition), another type provisions nothing.
func TestDedicatedServiceSockets(t *testing.T) {
	e := env.Start(t)
	const bundle = "-----BEGIN CERTIFICATE-----\ntest\n-----END CERTIFICATE-----\n"
	core, logs := observer.New(zap.WarnLevel)
	startController(t, e, controllerOpts{logs: core, provisioning: &controller.Provisioning{
		ServiceType: corev1.ServiceTypeLoadBalancer,
		Dedicated: &controller.Dedicated{Image: "ghcr.io/coxswain-labs/coxswain:test", DiscoveryAddress: "coxswain-discovery.coxswain-system.svc:50051",
			TrustBundle: func() []byte { return []byte(bundle) }, ServiceAccount: discovery.DedicatedServiceAccount},
	}})
	ns := namespace(t, e, "dedicated-sockets", nil)
	createClass(t, e, "coxswain", "")
	tlsSecret(t, e, ns, "cert", "web.example")
	createFilterObject(t, e, gatewayParametersGVR, infrav1a1.GatewayParametersKind, ns, "pool", map[string]any{
		"autoscaling":         map[string]any{"minReplicas": int64(2), "maxReplicas": int64(4)},
		"podDisruptionBudget": map[string]any{"minAvailable": int64(1)},
	})
	gw := socketsGateway(ns, "edge", &gwapiv1.GatewayInfrastructure{
		ParametersRef: &gwapiv1.LocalParametersReference{Group: infrav1a1.GroupName, Kind: infrav1a1.GatewayParametersKind, Name: "pool"}})
	if _, err := e.Gateway.GatewayV1().Gateways(ns).Create(ctxFor(t), gw, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createListenerSet(t, e, ns, "more", ns, "edge", gwapiv1.ListenerEntry{Name: "alt", Port: 8080, Protocol: gwapiv1.HTTPProtocolType})
	createCTP(t, e, ns, "h3", map[string]any{"targetRefs": []any{gatewayTarget("edge", "https")}, "http3": map[string]any{"enabled": true}})
	const name = "coxswain-edge"
	kube := e.Kube
	dedicatedService := func(check func(*corev1.Service) error) *corev1.Service {
		t.Helper()
		var svc *corev1.Service
		eventually(t, "the dedicated Service", func() (err error) {
			if svc, err = kube.CoreV1().Services(ns).Get(ctxFor(t), name, metav1.GetOptions{}); err != nil {
				return err
			}
			return check(svc)
		})
		return svc
	}

	t.Run("ListenerSet and HTTP/3 ports", func(t *testing.T) {
		dedicatedService(func(svc *corev1.Service) error {
			want := []string{"80/TCP->80", "443/TCP->443", "443/UDP->443", "8080/TCP->8080"}
			if got := servicePorts(svc); !slices.Equal(got, want) || svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
				return fmt.Errorf("%s ports %v, want LoadBalancer %v", svc.Spec.Type, got, want)
			}
			return nil
		})
		// Only the admin port: the sockets stay out of the pod template, so the ListenerSet
		// and HTTP/3, which came after the Deployment, did not roll its pods.
		eventually(t, "the proxy container's ports", func() error {
			d, err := kube.AppsV1().Deployments(ns).Get(ctxFor(t), name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			var got []string
			for _, p := range d.Spec.Template.Spec.Containers[0].Ports {
				got = append(got, fmt.Sprintf("%d/%s", p.ContainerPort, p.Protocol))
			}
			if want := []string{"9901/TCP"}; !slices.Equal(got, want) {
				return fmt.Errorf("container ports %v, want %v", got, want)
			}
			return nil
		})
	})

	t.Run("the trust bundle, HPA and PDB are repaired at once", func(t *testing.T) {
		cms := kube.CoreV1().ConfigMaps(ns)
		var cm *corev1.ConfigMap
		eventually(t, "the trust bundle", func() (err error) {
			cm, err = cms.Get(ctxFor(t), name+"-trust-bundle", metav1.GetOptions{})
			return err
		})
		edited := editLatest(t, func() (*corev1.ConfigMap, error) { return cms.Get(ctxFor(t), cm.Name, metav1.GetOptions{}) },
			func(cm *corev1.ConfigMap) { cm.Data["ca.crt"] = "tampered" },
			func(cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
				return cms.Update(ctxFor(t), cm, metav1.UpdateOptions{})
			})
		eventually(t, "the trust bundle repaired", func() error {
			got, err := cms.Get(ctxFor(t), cm.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got.ResourceVersion == edited.ResourceVersion || got.Data["ca.crt"] != bundle {
				return fmt.Errorf("ca.crt %q", got.Data["ca.crt"])
			}
			return nil
		})

		hpas := kube.AutoscalingV2().HorizontalPodAutoscalers(ns)
		hpa, err := hpas.Get(ctxFor(t), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := hpas.Delete(ctxFor(t), name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the HPA made again", func() error {
			got, err := hpas.Get(ctxFor(t), name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got.UID == hpa.UID || got.Spec.MaxReplicas != 4 {
				return fmt.Errorf("HPA uid %s max %d", got.UID, got.Spec.MaxReplicas)
			}
			return nil
		})

		pdbs := kube.PolicyV1().PodDisruptionBudgets(ns)
		var pdb *policyv1.PodDisruptionBudget
		eventually(t, "the PDB", func() (err error) {
			pdb, err = pdbs.Get(ctxFor(t), name, metav1.GetOptions{})
			return err
		})
		editLatest(t, func() (*policyv1.PodDisruptionBudget, error) {
			return pdbs.Get(ctxFor(t), pdb.Name, metav1.GetOptions{})
		},
			func(pdb *policyv1.PodDisruptionBudget) { pdb.Spec.MinAvailable = ptr.To(intstr.FromInt32(5)) },
			func(pdb *policyv1.PodDisruptionBudget) (*policyv1.PodDisruptionBudget, error) {
				return pdbs.Update(ctxFor(t), pdb, metav1.UpdateOptions{})
			})
		eventually(t, "the PDB repaired", func() error {
			got, err := pdbs.Get(ctxFor(t), name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got.Spec.MinAvailable == nil || got.Spec.MinAvailable.IntValue() != 1 {
				return fmt.Errorf("minAvailable %v", got.Spec.MinAvailable)
			}
			return nil
		})
	})

	setAddresses := func(addrs ...gwapiv1.GatewaySpecAddress) {
		t.Helper()
		updateGateway(t, e, ns, "edge", func(g *gwapiv1.Gateway) { g.Spec.Addresses = addrs })
	}
	ip := func(v string) gwapiv1.GatewaySpecAddress {
		return gwapiv1.GatewaySpecAddress{Type: new(gwapiv1.IPAddressType), Value: v}
	}

	t.Run("an IPAddress pins the Service as a ClusterIP", func(t *testing.T) {
		const pinned = "10.0.0.88" // inside the API server's default service range 10.0.0.0/24
		setAddresses(ip(pinned), gwapiv1.GatewaySpecAddress{Type: new(gwapiv1.HostnameAddressType), Value: "edge.example.com"})
		dedicatedService(func(svc *corev1.Service) error {
			if svc.Spec.ClusterIP != pinned || svc.Spec.Type != corev1.ServiceTypeClusterIP || len(svc.Spec.Ports) != 4 {
				return fmt.Errorf("%s clusterIP %s ports %v, want ClusterIP %s", svc.Spec.Type, svc.Spec.ClusterIP, servicePorts(svc), pinned)
			}
			return nil
		})
		waitGateway(t, e, ns, "edge", func(g *gwapiv1.Gateway) error {
			var got []string
			for _, a := range g.Status.Addresses {
				got = append(got, string(*a.Type)+"="+a.Value)
			}
			if want := "IPAddress=" + pinned + ",Hostname=edge.example.com"; strings.Join(got, ",") != want {
				return fmt.Errorf("status.addresses %v, want %s", got, want)
			}
			c := meta.FindStatusCondition(g.Status.Conditions, "Accepted")
			if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "is a ClusterIP Service, not LoadBalancer") {
				return fmt.Errorf("Accepted %+v, want True saying the Service is ClusterIP", c)
			}
			return nil
		})
	})

	t.Run("refused or two addresses are AddressNotUsable", func(t *testing.T) {
		setAddresses(ip("192.0.2.10")) // outside the service range: the API server refuses it
		waitGateway(t, e, ns, "edge", func(g *gwapiv1.Gateway) error {
			if len(g.Status.Addresses) > 0 {
				return fmt.Errorf("status.addresses %v, want none", g.Status.Addresses)
			}
			if err := checkConds(g.Status.Conditions, g.Generation, accepted, cond{"Programmed", "False", "AddressNotUsable"}); err != nil {
				return err
			}
			if c := meta.FindStatusCondition(g.Status.Conditions, "Programmed"); !strings.Contains(c.Message, "does not accept 192.0.2.10 as the cluster IP of Service "+name) {
				return fmt.Errorf("Programmed message %q", c.Message)
			}
			return nil
		})
		refusals := func() int {
			return logs.FilterMessage("the API server refused a provisioned object").FilterField(zap.String("object", "Service "+ns+"/"+name)).Len()
		}
		if n := refusals(); n != 1 {
			t.Errorf("%d WARN lines for the refused Service, want 1", n)
		}
		// Another translation (a new generation) sends nothing and logs nothing again.
		updateGateway(t, e, ns, "edge", func(g *gwapiv1.Gateway) { g.Labels = map[string]string{"touched": "yes"} })
		createCTP(t, e, ns, "unrelated", map[string]any{"targetRefs": []any{gatewayTarget("edge", "http")}})
		waitPolicyAncestor(t, e, clientTrafficPolicyGVR, ns, "unrelated", "edge", "http", "True", "Accepted", "")
		if n := refusals(); n != 1 {
			t.Errorf("%d WARN lines for the refused Service after another translation, want 1", n)
		}

		setAddresses(ip("10.0.0.89"), ip("10.0.0.90"))
		waitGateway(t, e, ns, "edge", func(g *gwapiv1.Gateway) error {
			return checkConds(g.Status.Conditions, g.Generation, accepted, cond{"Programmed", "False", "AddressNotUsable"})
		})
	})

	t.Run("an unsupported address type provisions nothing", func(t *testing.T) {
		setAddresses(gwapiv1.GatewaySpecAddress{Type: new(gwapiv1.NamedAddressType), Value: "pool-a"})
		waitGateway(t, e, ns, "edge", func(g *gwapiv1.Gateway) error {
			return checkConds(g.Status.Conditions, g.Generation, cond{"Accepted", "False", "UnsupportedAddress"}, cond{"Programmed", "False", "Invalid"})
		})
		eventually(t, "the dedicated pool pruned", func() error {
			if _, err := kube.AppsV1().Deployments(ns).Get(ctxFor(t), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("Deployment still there (%v)", err)
			}
			if _, err := kube.CoreV1().Services(ns).Get(ctxFor(t), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("Service still there (%v)", err)
			}
			return nil
		})
		// Back to no address: the pool comes back, with an address of the API server's choosing.
		setAddresses()
		dedicatedService(func(svc *corev1.Service) error {
			if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
				return fmt.Errorf("type %s, want the parameters' LoadBalancer", svc.Spec.Type)
			}
			return nil
		})
	})
}
