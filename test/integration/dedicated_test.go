package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/coxswain-labs/coxswain/controller"
	"github.com/coxswain-labs/coxswain/controller/discovery"
	infrav1a1 "github.com/coxswain-labs/coxswain/modules/api/infrastructure/v1alpha1"
	"github.com/coxswain-labs/coxswain/test/integration/env"
)

var gatewayParametersGVR = infrav1a1.SchemeGroupVersion.WithResource(infrav1a1.GatewayParametersResource)

// TestGatewayParametersSchema: the API server itself refuses parameters that would give a
// proxy host access or privilege (the CRD's CEL rules), and accepts examples/dedicated's.
func TestGatewayParametersSchema(t *testing.T) {
	e := env.Start(t)
	ns := namespace(t, e, "params", nil)
	for _, tc := range []struct {
		name, want string
		spec       map[string]any
	}{
		{"privileged", "privileged is not allowed", map[string]any{"pod": map[string]any{"containerSecurityContext": map[string]any{"privileged": true}}}},
		{"caps", "capabilities.add is not allowed", map[string]any{"pod": map[string]any{"containerSecurityContext": map[string]any{
			"capabilities": map[string]any{"add": []any{"NET_ADMIN"}}}}}},
		{"hostpath", "hostPath volumes are not allowed", map[string]any{"pod": map[string]any{"volumes": []any{
			map[string]any{"name": "h", "hostPath": map[string]any{"path": "/"}}}}}},
		{"both", "replicas and autoscaling are mutually exclusive", map[string]any{"replicas": int64(2), "autoscaling": map[string]any{"maxReplicas": int64(3)}}},
		{"pdb", "exactly one of minAvailable and maxUnavailable", map[string]any{"podDisruptionBudget": map[string]any{}}},
		{"hostnetwork", `unknown field "spec.pod.hostNetwork"`, map[string]any{"pod": map[string]any{"hostNetwork": true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": infrav1a1.SchemeGroupVersion.String(), "kind": infrav1a1.GatewayParametersKind,
				"metadata": map[string]any{"namespace": ns, "name": tc.name}, "spec": tc.spec,
			}}
			_, err := e.Dynamic.Resource(gatewayParametersGVR).Namespace(ns).Create(ctxFor(t), obj,
				metav1.CreateOptions{FieldValidation: "Strict"})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("create: %v, want an error containing %q", err, tc.want)
			}
		})
	}
	t.Run("the example", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join("..", "..", "examples", "dedicated", "gateway.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, doc := range strings.Split(string(b), "\n---\n") {
			var u unstructured.Unstructured
			if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
				t.Fatal(err)
			}
			if u.GetKind() != infrav1a1.GatewayParametersKind {
				continue
			}
			found = true
			u.SetNamespace(ns)
			if _, err := e.Dynamic.Resource(gatewayParametersGVR).Namespace(ns).Create(ctxFor(t), &u,
				metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
				t.Fatal(err)
			}
		}
		if !found {
			t.Fatal("examples/dedicated/gateway.yaml has no CoxswainGatewayParameters")
		}
	})
}

// TestDedicatedProvisioning: a Gateway naming CoxswainGatewayParameters gets its Deployment,
// Service, ServiceAccount and trust bundle from the controller, owned by the Gateway and built
// from the parameters; a change of the parameters is applied; autoscaling adds an HPA and going
// back prunes it; a deleted Service is put back; parameters the controller refuses, or that do
// not exist, are Accepted=False InvalidParameters and nothing stays provisioned. (The pods, the
// discovery connection and garbage collection on delete are test/conformance's
// TestDedicatedGateway, which has kube-controller-manager and a kubelet.)
func TestDedicatedProvisioning(t *testing.T) {
	e := env.Start(t)
	const bundle = "-----BEGIN CERTIFICATE-----\ntest\n-----END CERTIFICATE-----\n"
	startController(t, e, controllerOpts{provisioning: &controller.Provisioning{
		ServiceType: corev1.ServiceTypeClusterIP,
		Dedicated: &controller.Dedicated{Image: "ghcr.io/coxswain-labs/coxswain:test", DiscoveryAddress: "coxswain-discovery.coxswain-system.svc:50051",
			TrustBundle: func() []byte { return []byte(bundle) }, ServiceAccount: discovery.DedicatedServiceAccount},
	}})
	ns := namespace(t, e, "dedicated", nil)
	createClass(t, e, "dedicated", "")
	createFilterObject(t, e, gatewayParametersGVR, infrav1a1.GatewayParametersKind, ns, "pool", map[string]any{
		"replicas": int64(1), "extraArgs": []any{"--log-level=debug"},
	})
	gw := &gwapiv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge"}, Spec: gwapiv1.GatewaySpec{
		GatewayClassName: "dedicated",
		Infrastructure: &gwapiv1.GatewayInfrastructure{
			Labels:        map[gwapiv1.LabelKey]gwapiv1.LabelValue{"team": "edge", "app.kubernetes.io/name": "mine"},
			ParametersRef: &gwapiv1.LocalParametersReference{Group: infrav1a1.GroupName, Kind: infrav1a1.GatewayParametersKind, Name: "pool"},
		},
		Listeners: []gwapiv1.Listener{httpListener("http", 80), httpListener("alt", 8080)},
	}}
	gw, err := e.Gateway.GatewayV1().Gateways(ns).Create(ctxFor(t), gw, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	apps, core := e.Kube.AppsV1().Deployments(ns), e.Kube.CoreV1()
	owned := func(o metav1.Object) error {
		for _, r := range o.GetOwnerReferences() {
			if r.UID == gw.UID && r.Controller != nil && *r.Controller {
				return nil
			}
		}
		return fmt.Errorf("%s not owned by the Gateway: %+v", o.GetName(), o.GetOwnerReferences())
	}
	t.Run("provisioned from the parameters", func(t *testing.T) {
		eventually(t, "the Deployment", func() error {
			d, err := apps.Get(ctxFor(t), "coxswain-edge", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if err := owned(d); err != nil {
				return err
			}
			c := d.Spec.Template.Spec.Containers[0]
			switch {
			case *d.Spec.Replicas != 1:
				return fmt.Errorf("replicas %d", *d.Spec.Replicas)
			case c.Image != "ghcr.io/coxswain-labs/coxswain:test" || !slices.Contains(c.Args, "--gateway="+ns+"/edge") || !slices.Contains(c.Args, "--log-level=debug"):
				return fmt.Errorf("image %s args %q", c.Image, c.Args)
			case d.Labels["team"] != "edge" || d.Labels["app.kubernetes.io/name"] != "coxswain":
				return fmt.Errorf("labels %v", d.Labels)
			case d.Spec.Template.Spec.ServiceAccountName != "coxswain-edge":
				return fmt.Errorf("service account %s", d.Spec.Template.Spec.ServiceAccountName)
			}
			return nil
		})
		var svc *corev1.Service
		eventually(t, "the Service", func() (err error) {
			svc, err = core.Services(ns).Get(ctxFor(t), "coxswain-edge", metav1.GetOptions{})
			return err
		})
		if err := owned(svc); err != nil {
			t.Error(err)
		}
		var ports []int32
		for _, p := range svc.Spec.Ports {
			ports = append(ports, p.TargetPort.IntVal)
		}
		if !slices.Equal(ports, []int32{80, 8080}) || svc.Spec.Type != corev1.ServiceTypeClusterIP {
			t.Errorf("Service %s targetPorts %v", svc.Spec.Type, ports)
		}
		sa, err := core.ServiceAccounts(ns).Get(ctxFor(t), "coxswain-edge", metav1.GetOptions{})
		if err != nil || owned(sa) != nil || *sa.AutomountServiceAccountToken {
			t.Errorf("ServiceAccount %+v: %v", sa, err)
		}
		cm, err := core.ConfigMaps(ns).Get(ctxFor(t), "coxswain-edge-trust-bundle", metav1.GetOptions{})
		if err != nil || cm.Data["ca.crt"] != bundle {
			t.Errorf("trust bundle %+v: %v", cm, err)
		}
		// No shared-mode objects for a dedicated Gateway.
		eventually(t, "the Gateway's addresses", func() error {
			g, err := e.Gateway.GatewayV1().Gateways(ns).Get(ctxFor(t), "edge", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if len(g.Status.Addresses) != 1 || g.Status.Addresses[0].Value != svc.Spec.ClusterIP {
				return fmt.Errorf("addresses %+v, want the Service's %s", g.Status.Addresses, svc.Spec.ClusterIP)
			}
			if c := meta.FindStatusCondition(g.Status.Conditions, "Accepted"); c == nil || c.Status != metav1.ConditionTrue {
				return fmt.Errorf("Accepted %+v", c)
			}
			return nil
		})
	})
	t.Run("autoscaling replaces replicas, and back", func(t *testing.T) {
		setParams(t, e, ns, "pool", map[string]any{"autoscaling": map[string]any{"minReplicas": int64(2), "maxReplicas": int64(5)},
			"podDisruptionBudget": map[string]any{"minAvailable": int64(1)}})
		eventually(t, "the HPA and PDB", func() error {
			h, err := e.Kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctxFor(t), "coxswain-edge", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if h.Spec.MaxReplicas != 5 || *h.Spec.MinReplicas != 2 {
				return fmt.Errorf("HPA %+v", h.Spec)
			}
			_, err = e.Kube.PolicyV1().PodDisruptionBudgets(ns).Get(ctxFor(t), "coxswain-edge", metav1.GetOptions{})
			return err
		})
		setParams(t, e, ns, "pool", map[string]any{"replicas": int64(3)})
		eventually(t, "the HPA and PDB pruned, 3 replicas", func() error {
			if _, err := e.Kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctxFor(t), "coxswain-edge", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("HPA: %v", err)
			}
			if _, err := e.Kube.PolicyV1().PodDisruptionBudgets(ns).Get(ctxFor(t), "coxswain-edge", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("PDB: %v", err)
			}
			d, err := apps.Get(ctxFor(t), "coxswain-edge", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if d.Spec.Replicas == nil || *d.Spec.Replicas != 3 {
				return fmt.Errorf("replicas %v", d.Spec.Replicas)
			}
			return nil
		})
	})
	t.Run("a deleted Service is put back", func(t *testing.T) {
		if err := core.Services(ns).Delete(ctxFor(t), "coxswain-edge", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the Service back", func() error {
			_, err := core.Services(ns).Get(ctxFor(t), "coxswain-edge", metav1.GetOptions{})
			return err
		})
	})
	t.Run("refused parameters are InvalidParameters and unprovision", func(t *testing.T) {
		setParams(t, e, ns, "pool", map[string]any{"extraArgs": []any{"--token-file=/elsewhere"}})
		waitInvalidParameters(t, e, ns, "edge", "spec.extraArgs[0]: --token-file is set by the controller")
		eventually(t, "the Deployment pruned", func() error {
			if _, err := apps.Get(ctxFor(t), "coxswain-edge", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("Deployment: %v", err)
			}
			return nil
		})
	})
	t.Run("missing parameters are InvalidParameters", func(t *testing.T) {
		if err := e.Dynamic.Resource(gatewayParametersGVR).Namespace(ns).Delete(ctxFor(t), "pool", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitInvalidParameters(t, e, ns, "edge", "CoxswainGatewayParameters "+ns+"/pool not found")
	})
}

func setParams(t *testing.T, e *env.Env, ns, name string, spec map[string]any) {
	t.Helper()
	eventually(t, "updating "+name, func() error {
		cur, err := e.Dynamic.Resource(gatewayParametersGVR).Namespace(ns).Get(ctxFor(t), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Object["spec"] = spec
		_, err = e.Dynamic.Resource(gatewayParametersGVR).Namespace(ns).Update(ctxFor(t), cur, metav1.UpdateOptions{})
		return err
	})
}

func waitInvalidParameters(t *testing.T, e *env.Env, ns, name, want string) {
	t.Helper()
	eventually(t, "Accepted=False InvalidParameters", func() error {
		g, err := e.Gateway.GatewayV1().Gateways(ns).Get(ctxFor(t), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(g.Status.Conditions, "Accepted")
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "InvalidParameters" || !strings.Contains(c.Message, want) {
			return fmt.Errorf("Accepted %+v, want InvalidParameters with %q", c, want)
		}
		return nil
	})
}
