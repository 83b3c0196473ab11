package integration

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller"
	"github.com/coxswain-labs/coxswain/controller/discovery"
	infrav1a1 "github.com/coxswain-labs/coxswain/modules/api/infrastructure/v1alpha1"
	"github.com/coxswain-labs/coxswain/test/integration/env"
)

// deployDedicatedRBAC runs the dedicated mode as the chart's controller ServiceAccount, with
// exactly the chart's RBAC (TestDeployManifests applied it): the rows it needs beyond the shared
// mode's (Deployments, HPAs, PDBs, ConfigMaps in any namespace, the CoxswainGatewayParameters
// informer) are used for real, not only asked about. A GatewayClass whose parametersRef names a
// CoxswainGatewayParameters makes its Gateway dedicated: the controller creates its Deployment,
// Service, ServiceAccount, trust-bundle ConfigMap, HPA and PDB, owned by the Gateway; a deleted
// Deployment and HPA are put back (the list/watch rows feed the caches that see it); a Gateway
// whose own parametersRef names another kind is Accepted=False InvalidParameters.
func deployDedicatedRBAC(t *testing.T, e *env.Env) {
	cfg := rest.CopyConfig(e.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: controllerSA}
	const (
		name   = "coxswain-labs.dev/dedicated-rbac"
		bundle = "-----BEGIN CERTIFICATE-----\ndedicated-rbac\n-----END CERTIFICATE-----\n"
	)
	startController(t, e, controllerOpts{config: cfg, leaseNamespace: controllerNS, lease: "dedicated-rbac", name: name,
		noAddress: true, addresses: []string{}, provisioning: &controller.Provisioning{
			ServiceType: corev1.ServiceTypeClusterIP, Ports: provisionPorts, ProxyNamespace: controllerNS,
			Dedicated: &controller.Dedicated{Image: "ghcr.io/coxswain-labs/coxswain:test",
				DiscoveryAddress: "coxswain-discovery.coxswain-system.svc:50051",
				TrustBundle:      func() []byte { return []byte(bundle) }, ServiceAccount: discovery.DedicatedServiceAccount},
		}})
	ns := namespace(t, e, "dedicated-rbac", nil)
	createFilterObject(t, e, gatewayParametersGVR, infrav1a1.GatewayParametersKind, ns, "pool", map[string]any{
		"autoscaling":         map[string]any{"minReplicas": int64(2), "maxReplicas": int64(4)},
		"podDisruptionBudget": map[string]any{"minAvailable": int64(1)},
	})
	// The class's parametersRef is the default of its Gateways (docs/dedicated.md).
	if _, err := e.Gateway.GatewayV1().GatewayClasses().Create(ctxFor(t), &gwapiv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: "dedicated-rbac"},
		Spec: gwapiv1.GatewayClassSpec{ControllerName: name, ParametersRef: &gwapiv1.ParametersReference{
			Group: infrav1a1.GroupName, Kind: infrav1a1.GatewayParametersKind, Name: "pool", Namespace: ptr.To(gwapiv1.Namespace(ns))}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gw := classGateway(t, e, ns, "edge", "dedicated-rbac", &gwapiv1.GatewayInfrastructure{
		Labels: map[gwapiv1.LabelKey]gwapiv1.LabelValue{"team": "edge"},
	})

	const obj = "coxswain-edge"
	kube := e.Kube
	// each gets one provisioned object, by kind.
	each := map[string]func() (metav1.Object, error){
		"Deployment": func() (metav1.Object, error) {
			return kube.AppsV1().Deployments(ns).Get(ctxFor(t), obj, metav1.GetOptions{})
		},
		"Service": func() (metav1.Object, error) {
			return kube.CoreV1().Services(ns).Get(ctxFor(t), obj, metav1.GetOptions{})
		},
		"ServiceAccount": func() (metav1.Object, error) {
			return kube.CoreV1().ServiceAccounts(ns).Get(ctxFor(t), obj, metav1.GetOptions{})
		},
		"ConfigMap": func() (metav1.Object, error) {
			return kube.CoreV1().ConfigMaps(ns).Get(ctxFor(t), obj+"-trust-bundle", metav1.GetOptions{})
		},
		"HorizontalPodAutoscaler": func() (metav1.Object, error) {
			return kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctxFor(t), obj, metav1.GetOptions{})
		},
		"PodDisruptionBudget": func() (metav1.Object, error) {
			return kube.PolicyV1().PodDisruptionBudgets(ns).Get(ctxFor(t), obj, metav1.GetOptions{})
		},
	}
	uids := map[string]string{}
	for kind, get := range each {
		eventually(t, "the dedicated "+kind, func() error {
			o, err := get()
			if err != nil {
				return err
			}
			if err := ownedByGateway(o, gw); err != nil {
				return err
			}
			uids[kind] = string(o.GetUID())
			return subset(o.GetLabels(), map[string]string{"team": "edge", "gateway.networking.k8s.io/gateway-name": "edge"})
		})
	}
	// Drift: what the informers of the chart's list/watch rows see deleted is made again.
	for kind, del := range map[string]func() error{
		"Deployment": func() error { return kube.AppsV1().Deployments(ns).Delete(ctxFor(t), obj, metav1.DeleteOptions{}) },
		"HorizontalPodAutoscaler": func() error {
			return kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Delete(ctxFor(t), obj, metav1.DeleteOptions{})
		},
	} {
		if err := del(); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the deleted "+kind+" made again", func() error {
			o, err := each[kind]()
			if err != nil {
				return err
			}
			if string(o.GetUID()) == uids[kind] {
				return fmt.Errorf("not deleted yet")
			}
			return nil
		})
	}

	// A Gateway's own parametersRef to another kind replaces the class's, and is refused.
	classGateway(t, e, ns, "other", "dedicated-rbac", &gwapiv1.GatewayInfrastructure{
		ParametersRef: &gwapiv1.LocalParametersReference{Kind: "ConfigMap", Name: "settings"},
	})
	waitInvalidParameters(t, e, ns, "other",
		"spec.infrastructure.parametersRef: ConfigMap settings: only CoxswainGatewayParameters.gateway.coxswain-labs.dev is supported")
}

// classGateway creates a Gateway of class with one HTTP listener on :80 and infra.
func classGateway(t *testing.T, e *env.Env, ns, name, class string, infra *gwapiv1.GatewayInfrastructure) *gwapiv1.Gateway {
	t.Helper()
	gw, err := e.Gateway.GatewayV1().Gateways(ns).Create(ctxFor(t), &gwapiv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: gwapiv1.GatewaySpec{GatewayClassName: gwapiv1.ObjectName(class), Infrastructure: infra,
			Listeners: []gwapiv1.Listener{httpListener("http", 80)}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return gw
}
