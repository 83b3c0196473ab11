package conformance_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
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
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/test/conformance/harness"
)

var gatewayParametersGVR = schema.GroupVersionResource{Group: "gateway.coxswain-labs.dev", Version: "v1alpha1", Resource: "coxswaingatewayparameters"}

// TestDedicatedGateway proves the dedicated mode end to end: a Gateway naming
// CoxswainGatewayParameters gets a Deployment, Service and ServiceAccount from the controller;
// kube-controller-manager turns the Deployment into a pod; the process kubelet runs it from the
// coxswain binary (the image ghcr.io/coxswain-labs/coxswain), with its projected discovery token
// and the trust bundle at the documented paths; that proxy connects over discovery as the
// Gateway's dedicated proxy, binds the listener, acknowledges (Programmed) and serves a request
// to an echo backend. Deleting the Gateway has the garbage collector delete what was provisioned.
func TestDedicatedGateway(t *testing.T) {
	c := harness.StartProvisioning(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	kube := c.Env.Kube
	const ns, gwName = "dedicated-e2e", "edge"
	c.GatewayClass(t, "coxswain")
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
	params := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.coxswain-labs.dev/v1alpha1", "kind": "CoxswainGatewayParameters",
		"metadata": map[string]any{"name": "edge-pool", "namespace": ns},
		"spec": map[string]any{
			"replicas": int64(1),
			"service":  map[string]any{"type": "ClusterIP", "annotations": map[string]any{"example.com/lb": "internal"}},
			"pod":      map[string]any{"labels": map[string]any{"tier": "edge"}},
		},
	}}
	must(t, create(ctx, func() error {
		_, err := c.Env.Dynamic.Resource(gatewayParametersGVR).Namespace(ns).Create(ctx, params, metav1.CreateOptions{})
		return err
	}))
	gw := &gwapiv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Name: gwName, Namespace: ns},
		Spec: gwapiv1.GatewaySpec{
			GatewayClassName: "coxswain",
			Infrastructure: &gwapiv1.GatewayInfrastructure{
				Labels:        map[gwapiv1.LabelKey]gwapiv1.LabelValue{"team": "edge"},
				ParametersRef: &gwapiv1.LocalParametersReference{Group: "gateway.coxswain-labs.dev", Kind: "CoxswainGatewayParameters", Name: "edge-pool"},
			},
			Listeners: []gwapiv1.Listener{{Name: "http", Port: 80, Protocol: gwapiv1.HTTPProtocolType}},
		},
	}
	created, err := c.Env.Gateway.GatewayV1().Gateways(ns).Create(ctx, gw, metav1.CreateOptions{})
	must(t, err)
	route := &gwapiv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: ns},
		Spec: gwapiv1.HTTPRouteSpec{
			CommonRouteSpec: gwapiv1.CommonRouteSpec{ParentRefs: []gwapiv1.ParentReference{{Name: gwName}}},
			Hostnames:       []gwapiv1.Hostname{"echo.example"},
			Rules: []gwapiv1.HTTPRouteRule{{BackendRefs: []gwapiv1.HTTPBackendRef{{BackendRef: gwapiv1.BackendRef{
				BackendObjectReference: gwapiv1.BackendObjectReference{Name: "echo", Port: ptr.To(gwapiv1.PortNumber(8080))}}}}}},
		},
	}
	_, err = c.Env.Gateway.GatewayV1().HTTPRoutes(ns).Create(ctx, route, metav1.CreateOptions{})
	must(t, err)

	// What the controller provisioned, owned by the Gateway.
	name := "coxswain-" + gwName
	var dep *appsv1.Deployment
	poll(ctx, t, c, "the Deployment", func() (bool, string) {
		dep, err = kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	if !ownedBy(dep.OwnerReferences, created.UID) || dep.Labels["team"] != "edge" || dep.Spec.Template.Labels["tier"] != "edge" {
		t.Errorf("Deployment owners %+v labels %v pod labels %v", dep.OwnerReferences, dep.Labels, dep.Spec.Template.Labels)
	}
	var svc *corev1.Service
	poll(ctx, t, c, "the Service", func() (bool, string) {
		svc, err = kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 80 || svc.Spec.Type != corev1.ServiceTypeClusterIP ||
		svc.Annotations["example.com/lb"] != "internal" || !ownedBy(svc.OwnerReferences, created.UID) {
		t.Errorf("Service %+v annotations %v owners %+v", svc.Spec, svc.Annotations, svc.OwnerReferences)
	}
	var sa *corev1.ServiceAccount
	poll(ctx, t, c, "the ServiceAccount", func() (bool, string) {
		sa, err = kube.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
	if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken || !ownedBy(sa.OwnerReferences, created.UID) {
		t.Errorf("ServiceAccount %+v", sa)
	}

	// The pod runs and the Gateway is programmed: the proxy connected as the Gateway's dedicated
	// proxy, bound :80 and acknowledged the snapshot.
	var podIP string
	poll(ctx, t, c, "a Ready proxy pod", func() (bool, string) {
		pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "gateway.networking.k8s.io/gateway-name=" + gwName})
		if err != nil {
			return false, err.Error()
		}
		for _, p := range pods.Items {
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue && p.Status.PodIP != "" {
					podIP = p.Status.PodIP
					return true, ""
				}
			}
		}
		return false, fmt.Sprintf("%d pods, none Ready: %+v", len(pods.Items), podStates(pods.Items))
	})
	poll(ctx, t, c, "Programmed=True", func() (bool, string) {
		g, err := c.Env.Gateway.GatewayV1().Gateways(ns).Get(ctx, gwName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		cond := meta.FindStatusCondition(g.Status.Conditions, string(gwapiv1.GatewayConditionProgrammed))
		if cond == nil || cond.Status != metav1.ConditionTrue || cond.ObservedGeneration != g.Generation {
			return false, fmt.Sprintf("%+v", g.Status.Conditions)
		}
		return true, ""
	})
	client := &http.Client{Timeout: 5 * time.Second}
	var body string
	poll(ctx, t, c, "a request through the dedicated proxy", func() (bool, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(podIP, "80")+"/hello", nil)
		req.Host = "echo.example"
		resp, err := client.Do(req)
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return false, fmt.Sprintf("%d %s", resp.StatusCode, b)
		}
		body = string(b)
		return true, ""
	})
	var echoed struct {
		Path, Namespace, Pod string
	}
	if err := json.Unmarshal([]byte(body), &echoed); err != nil || echoed.Path != "/hello" || echoed.Namespace != ns || !strings.HasPrefix(echoed.Pod, "echo-") {
		t.Errorf("echo response %s (%v)", body, err)
	}

	// Deleting the Gateway deletes what it owns (kube-controller-manager's garbage collector).
	must(t, c.Env.Gateway.GatewayV1().Gateways(ns).Delete(ctx, gwName, metav1.DeleteOptions{}))
	poll(ctx, t, c, "the provisioned objects deleted", func() (bool, string) {
		var left []string
		if _, err := kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			left = append(left, "Deployment")
		}
		if _, err := kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			left = append(left, "Service")
		}
		if _, err := kube.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			left = append(left, "ServiceAccount")
		}
		if _, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, name+"-trust-bundle", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			left = append(left, "ConfigMap")
		}
		return len(left) == 0, fmt.Sprintf("still there: %v", left)
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// create runs a create call, tolerating AlreadyExists.
func create(_ context.Context, f func() error) error {
	if err := f(); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

func poll(ctx context.Context, t *testing.T, c *harness.Cluster, what string, cond func() (bool, string)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		ok, why := cond()
		last = why
		return ok, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v (last: %s; logs: %s, pods in %s/pods)", what, err, last, c.Coxswain.Logs(), c.Artifacts)
	}
}

func ownedBy(refs []metav1.OwnerReference, uid types.UID) bool {
	for _, r := range refs {
		if r.UID == uid && r.Kind == "Gateway" && ptr.Deref(r.Controller, false) {
			return true
		}
	}
	return false
}

func podStates(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		s := p.Name + " " + string(p.Status.Phase)
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil {
				s += " waiting " + w.Reason + ": " + w.Message
			}
		}
		out = append(out, s)
	}
	return out
}
