package conformance_test

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/test/conformance/harness"
)

var (
	gatewayParametersGVR = schema.GroupVersionResource{Group: "gateway.coxswain-labs.dev", Version: "v1alpha1", Resource: "coxswaingatewayparameters"}
	clientTrafficGVR     = schema.GroupVersionResource{Group: "gateway.coxswain-labs.dev", Version: "v1alpha1", Resource: "clienttrafficpolicies"}
)

// The dedicated Gateway of TestDedicatedGateway: its pinned cluster IP is in the harness's
// ServiceCIDR, in the low band the API server keeps for static assignment, so no Service of the
// stack has taken it.
const (
	dedicatedNS     = "dedicated-e2e"
	dedicatedGW     = "edge"
	pinnedIP        = "10.96.0.240"
	h3Host          = "h3.example"
	provisionedName = "coxswain-" + dedicatedGW
)

// TestDedicatedGateway proves the dedicated mode end to end: a Gateway naming
// CoxswainGatewayParameters gets a Deployment, Service and ServiceAccount from the controller;
// kube-controller-manager turns the Deployment into a pod; the process kubelet runs it from the
// coxswain binary (the image ghcr.io/coxswain-labs/coxswain), with its projected discovery token
// and the trust bundle at the documented paths; that proxy connects over discovery as the
// Gateway's dedicated proxy, binds the listeners, acknowledges (Programmed) and serves requests
// to an echo backend. The Gateway pins its Service's cluster IP (spec.addresses), admits a
// ListenerSet whose listener adds a port, and has HTTP/3 on its HTTPS listener: the Service and
// the pod carry every one of those ports, and the harness's service proxy carries requests to
// the pinned IP on each of them — plain HTTP, HTTP through the ListenerSet's listener (a route
// attached to the ListenerSet), HTTPS over TCP and HTTP/3 over UDP. Deleting the Gateway has the
// garbage collector delete what was provisioned.
func TestDedicatedGateway(t *testing.T) {
	c := harness.StartProvisioning(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	c.GatewayClass(t, "coxswain")
	cert := dedicatedObjects(ctx, t, c)
	created, err := c.Env.Gateway.GatewayV1().Gateways(dedicatedNS).Get(ctx, dedicatedGW, metav1.GetOptions{})
	must(t, err)

	checkProvisioned(ctx, t, c, created.UID)
	podIP, podHash := readyProxyPod(ctx, t, c)
	poll(ctx, t, c, "Programmed=True with the pinned address, the ListenerSet Programmed", func() (bool, string) {
		g, err := c.Env.Gateway.GatewayV1().Gateways(dedicatedNS).Get(ctx, dedicatedGW, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		cond := meta.FindStatusCondition(g.Status.Conditions, string(gwapiv1.GatewayConditionProgrammed))
		if cond == nil || cond.Status != metav1.ConditionTrue || cond.ObservedGeneration != g.Generation {
			return false, fmt.Sprintf("%+v", g.Status.Conditions)
		}
		if len(g.Status.Addresses) != 1 || g.Status.Addresses[0].Value != pinnedIP {
			return false, fmt.Sprintf("status.addresses %+v, want %s", g.Status.Addresses, pinnedIP)
		}
		ls, err := c.Env.Gateway.GatewayV1().ListenerSets(dedicatedNS).Get(ctx, "more", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, typ := range []string{"Accepted", "Programmed"} {
			if c := meta.FindStatusCondition(ls.Status.Conditions, typ); c == nil || c.Status != metav1.ConditionTrue {
				return false, fmt.Sprintf("ListenerSet %s: %+v", typ, ls.Status.Conditions)
			}
		}
		return true, ""
	})

	plain := &http.Client{Timeout: 5 * time.Second}
	h3, h3Transport := http3Client(net.JoinHostPort(pinnedIP, "443"), cert)
	defer h3Transport.Close()
	for _, r := range []struct {
		what, url, host string
		client          *http.Client
		proto           int
	}{
		{"HTTP to the pod", "http://" + net.JoinHostPort(podIP, "80") + "/hello", "echo.example", plain, 1},
		{"HTTP to the pinned cluster IP", "http://" + pinnedIP + "/pinned", "echo.example", plain, 1},
		{"the ListenerSet's listener on the pod", "http://" + net.JoinHostPort(podIP, "8080") + "/set", "set.example", plain, 1},
		{"the ListenerSet's listener on the pinned cluster IP", "http://" + net.JoinHostPort(pinnedIP, "8080") + "/set", "set.example", plain, 1},
		{"HTTPS over TCP on the pinned cluster IP", "https://" + h3Host + "/tls", h3Host, httpsClient(net.JoinHostPort(pinnedIP, "443"), cert), 0},
		{"HTTP/3 over UDP on the pinned cluster IP", "https://" + h3Host + "/quic", h3Host, h3, 3},
	} {
		var served string
		poll(ctx, t, c, r.what, func() (ok bool, why string) {
			ok, served = echoGet(ctx, r.client, r.url, r.host, dedicatedNS, r.proto)
			return ok, served
		})
		t.Logf("%s: %s", r.what, served)
	}
	// Only the ListenerSet's route serves its port: the Gateway's own route is not attached there.
	if ok, _ := echoGet(ctx, plain, "http://"+net.JoinHostPort(podIP, "8080")+"/", "echo.example", dedicatedNS, 1); ok {
		t.Errorf("the Gateway's route answered on the ListenerSet's port 8080")
	}
	// The ListenerSet and HTTP/3's UDP socket came after the Deployment: the running proxies
	// bound them, the pods were not rolled (the listener ports are not in the pod template).
	pods, err := c.Env.Kube.CoreV1().Pods(dedicatedNS).List(ctx, metav1.ListOptions{LabelSelector: "gateway.networking.k8s.io/gateway-name=" + dedicatedGW})
	must(t, err)
	for _, p := range pods.Items {
		if h := p.Labels[appsv1.DefaultDeploymentUniqueLabelKey]; h != podHash {
			t.Errorf("proxy pod %s has pod template %s, the first Ready one had %s: a listener change rolled the Deployment", p.Name, h, podHash)
		}
	}

	// Deleting the Gateway deletes what it owns (kube-controller-manager's garbage collector).
	kube := c.Env.Kube
	must(t, c.Env.Gateway.GatewayV1().Gateways(dedicatedNS).Delete(ctx, dedicatedGW, metav1.DeleteOptions{}))
	poll(ctx, t, c, "the provisioned objects deleted", func() (bool, string) {
		var left []string
		if _, err := kube.AppsV1().Deployments(dedicatedNS).Get(ctx, provisionedName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			left = append(left, "Deployment")
		}
		if _, err := kube.CoreV1().Services(dedicatedNS).Get(ctx, provisionedName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			left = append(left, "Service")
		}
		if _, err := kube.CoreV1().ServiceAccounts(dedicatedNS).Get(ctx, provisionedName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			left = append(left, "ServiceAccount")
		}
		if _, err := kube.CoreV1().ConfigMaps(dedicatedNS).Get(ctx, provisionedName+"-trust-bundle", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			left = append(left, "ConfigMap")
		}
		return len(left) == 0, fmt.Sprintf("still there: %v", left)
	})
}

// dedicatedObjects creates what the user writes: the namespace, an echo Deployment and Service,
// the CoxswainGatewayParameters, the Gateway (HTTP :80, HTTPS :443 for h3.example, a pinned
// IPAddress, ListenerSets of its namespace allowed), a ListenerSet adding HTTP :8080, a route on
// the Gateway, one on the ListenerSet, and a ClientTrafficPolicy turning HTTP/3 on for the HTTPS
// listener. It returns the HTTPS listener's certificate.
func dedicatedObjects(ctx context.Context, t *testing.T, c *harness.Cluster) *x509.Certificate {
	t.Helper()
	kube, gwc := c.Env.Kube, c.Env.Gateway.GatewayV1()
	const ns = dedicatedNS
	must(t, create(ctx, func() error {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		return err
	}))
	echoLabels := map[string]string{"app": "echo"}
	must(t, create(ctx, func() error {
		_, err := kube.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "echo"},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: echoLabels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: echoLabels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "echo", Image: "registry.k8s.io/gateway-api/echo-basic:v0.1.0",
					Env: []corev1.EnvVar{
						{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
						{Name: "NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
					},
				}}}}},
		}, metav1.CreateOptions{})
		return err
	}))
	must(t, create(ctx, func() error {
		_, err := kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "echo"}, Spec: corev1.ServiceSpec{
			Selector: echoLabels, Ports: []corev1.ServicePort{{Port: 8080, TargetPort: intstr.FromInt32(3000)}}}}, metav1.CreateOptions{})
		return err
	}))
	cert, err := tlsSecret(ctx, kube, ns, "h3-cert", h3Host)
	must(t, err)
	unstructuredCreate(ctx, t, c, gatewayParametersGVR, "CoxswainGatewayParameters", "edge-pool", map[string]any{
		"replicas": int64(1),
		"service":  map[string]any{"type": "ClusterIP", "annotations": map[string]any{"example.com/lb": "internal"}},
		"pod":      map[string]any{"labels": map[string]any{"tier": "edge"}},
	})
	same := gwapiv1.NamespacesFromSame
	_, err = gwc.Gateways(ns).Create(ctx, &gwapiv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Name: dedicatedGW, Namespace: ns},
		Spec: gwapiv1.GatewaySpec{
			GatewayClassName: "coxswain",
			Infrastructure: &gwapiv1.GatewayInfrastructure{
				Labels:        map[gwapiv1.LabelKey]gwapiv1.LabelValue{"team": "edge"},
				ParametersRef: &gwapiv1.LocalParametersReference{Group: "gateway.coxswain-labs.dev", Kind: "CoxswainGatewayParameters", Name: "edge-pool"},
			},
			Addresses:        []gwapiv1.GatewaySpecAddress{{Type: ptr.To(gwapiv1.IPAddressType), Value: pinnedIP}},
			AllowedListeners: &gwapiv1.AllowedListeners{Namespaces: &gwapiv1.ListenerNamespaces{From: &same}},
			Listeners: []gwapiv1.Listener{
				{Name: "http", Port: 80, Protocol: gwapiv1.HTTPProtocolType},
				{Name: "https", Port: 443, Protocol: gwapiv1.HTTPSProtocolType, Hostname: ptr.To(gwapiv1.Hostname(h3Host)),
					TLS: &gwapiv1.ListenerTLSConfig{Mode: ptr.To(gwapiv1.TLSModeTerminate),
						CertificateRefs: []gwapiv1.SecretObjectReference{{Name: "h3-cert"}}}},
			},
		},
	}, metav1.CreateOptions{})
	must(t, err)
	_, err = gwc.ListenerSets(ns).Create(ctx, &gwapiv1.ListenerSet{
		ObjectMeta: metav1.ObjectMeta{Name: "more", Namespace: ns},
		Spec: gwapiv1.ListenerSetSpec{
			ParentRef: gwapiv1.ParentGatewayReference{Name: dedicatedGW},
			Listeners: []gwapiv1.ListenerEntry{{Name: "alt", Port: 8080, Protocol: gwapiv1.HTTPProtocolType}},
		},
	}, metav1.CreateOptions{})
	must(t, err)
	echoBackend := []gwapiv1.HTTPRouteRule{{BackendRefs: []gwapiv1.HTTPBackendRef{{BackendRef: gwapiv1.BackendRef{
		BackendObjectReference: gwapiv1.BackendObjectReference{Name: "echo", Port: ptr.To(gwapiv1.PortNumber(8080))}}}}}}
	for name, spec := range map[string]gwapiv1.HTTPRouteSpec{
		"echo": {CommonRouteSpec: gwapiv1.CommonRouteSpec{ParentRefs: []gwapiv1.ParentReference{{Name: dedicatedGW}}},
			Hostnames: []gwapiv1.Hostname{"echo.example", h3Host}, Rules: echoBackend},
		"via-set": {CommonRouteSpec: gwapiv1.CommonRouteSpec{ParentRefs: []gwapiv1.ParentReference{{
			Group: ptr.To(gwapiv1.Group(gwapiv1.GroupName)), Kind: ptr.To(gwapiv1.Kind("ListenerSet")), Name: "more"}}},
			Hostnames: []gwapiv1.Hostname{"set.example"}, Rules: echoBackend},
	} {
		_, err = gwc.HTTPRoutes(ns).Create(ctx, &gwapiv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec}, metav1.CreateOptions{})
		must(t, err)
	}
	unstructuredCreate(ctx, t, c, clientTrafficGVR, "ClientTrafficPolicy", "h3", map[string]any{
		"targetRefs": []any{map[string]any{"group": gwapiv1.GroupName, "kind": "Gateway", "name": dedicatedGW, "sectionName": "https"}},
		"http3":      map[string]any{"enabled": true},
	})
	return cert
}

func unstructuredCreate(ctx context.Context, t *testing.T, c *harness.Cluster, gvr schema.GroupVersionResource, kind, name string, spec map[string]any) {
	t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvr.GroupVersion().String(), "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": dedicatedNS},
		"spec":     spec,
	}}
	must(t, create(ctx, func() error {
		_, err := c.Env.Dynamic.Resource(gvr).Namespace(dedicatedNS).Create(ctx, obj, metav1.CreateOptions{})
		return err
	}))
}

// checkProvisioned waits for the Deployment, Service and ServiceAccount the controller makes for
// the Gateway with UID gw, and checks them: owned by it, labelled from its infrastructure and
// the parameters, the Service pinned to pinnedIP with a port per socket (the ListenerSet's 8080,
// HTTP/3's 443/UDP), which the proxy container declares too.
func checkProvisioned(ctx context.Context, t *testing.T, c *harness.Cluster, gw types.UID) {
	t.Helper()
	kube := c.Env.Kube
	wantPorts := []string{"80/TCP", "443/TCP", "443/UDP", "8080/TCP"}
	var dep *appsv1.Deployment
	poll(ctx, t, c, "the Deployment", func() (bool, string) {
		var err error
		dep, err = kube.AppsV1().Deployments(dedicatedNS).Get(ctx, provisionedName, metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
	// The container declares its admin port only: the sockets are the Service's (below), and
	// out of the pod template a listener change does not roll the pods.
	if ports := dep.Spec.Template.Spec.Containers[0].Ports; len(ports) != 1 || ports[0].ContainerPort != 9901 {
		t.Errorf("container ports %+v, want only the admin port 9901", ports)
	}
	if !ownedBy(dep.OwnerReferences, gw) || dep.Labels["team"] != "edge" || dep.Spec.Template.Labels["tier"] != "edge" {
		t.Errorf("Deployment owners %+v labels %v pod labels %v", dep.OwnerReferences, dep.Labels, dep.Spec.Template.Labels)
	}
	var svc *corev1.Service
	poll(ctx, t, c, "the Service pinned to "+pinnedIP+" with a port per socket", func() (bool, string) {
		var err error
		if svc, err = kube.CoreV1().Services(dedicatedNS).Get(ctx, provisionedName, metav1.GetOptions{}); err != nil {
			return false, err.Error()
		}
		var got []string
		for _, p := range svc.Spec.Ports {
			if p.TargetPort.IntValue() != int(p.Port) {
				return false, fmt.Sprintf("port %d targets %s", p.Port, p.TargetPort.String())
			}
			got = append(got, fmt.Sprintf("%d/%s", p.Port, p.Protocol))
		}
		ok := slices.Equal(got, wantPorts) && svc.Spec.ClusterIP == pinnedIP && svc.Spec.Type == corev1.ServiceTypeClusterIP
		return ok, fmt.Sprintf("%s %s ports %v", svc.Spec.Type, svc.Spec.ClusterIP, got)
	})
	if svc.Annotations["example.com/lb"] != "internal" || !ownedBy(svc.OwnerReferences, gw) {
		t.Errorf("Service annotations %v owners %+v", svc.Annotations, svc.OwnerReferences)
	}
	var sa *corev1.ServiceAccount
	poll(ctx, t, c, "the ServiceAccount", func() (bool, string) {
		var err error
		sa, err = kube.CoreV1().ServiceAccounts(dedicatedNS).Get(ctx, provisionedName, metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
	if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken || !ownedBy(sa.OwnerReferences, gw) {
		t.Errorf("ServiceAccount %+v", sa)
	}
}

// readyProxyPod waits for a Ready pod of the dedicated Gateway and returns its IP and its pod
// template hash (the ReplicaSet it belongs to).
func readyProxyPod(ctx context.Context, t *testing.T, c *harness.Cluster) (ip, templateHash string) {
	t.Helper()
	poll(ctx, t, c, "a Ready proxy pod", func() (bool, string) {
		pods, err := c.Env.Kube.CoreV1().Pods(dedicatedNS).List(ctx, metav1.ListOptions{LabelSelector: "gateway.networking.k8s.io/gateway-name=" + dedicatedGW})
		if err != nil {
			return false, err.Error()
		}
		for _, p := range pods.Items {
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue && p.Status.PodIP != "" {
					ip, templateHash = p.Status.PodIP, p.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
					return true, ""
				}
			}
		}
		return false, fmt.Sprintf("%d pods, none Ready: %+v", len(pods.Items), podStates(pods.Items))
	})
	return ip, templateHash
}
