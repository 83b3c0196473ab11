package integration

import (
	"fmt"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller"
	"github.com/coxswain-labs/coxswain/controller/discovery"
	"github.com/coxswain-labs/coxswain/controller/provision"
	infrav1a1 "github.com/coxswain-labs/coxswain/modules/api/infrastructure/v1alpha1"
	"github.com/coxswain-labs/coxswain/test/integration/env"
)

// TestProvisionedDriftAndConflicts covers what the other provisioning tests leave out, on the
// real API server with one controller provisioning both modes: a reserved GEP-1762 label in
// spec.infrastructure.labels is dropped, named in Accepted and logged at WARN once however
// often the Gateway is reconciled; a dedicated Gateway's Deployment and ServiceAccount, edited or
// deleted, are repaired; and a Deployment (dedicated) or ServiceAccount (shared) of the
// provisioned name that the Gateway does not own is a Programmed=False NoResources condition
// naming it, and is never overwritten.
func TestProvisionedDriftAndConflicts(t *testing.T) {
	e := env.Start(t)
	logs, seen := observer.New(zap.WarnLevel)
	startController(t, e, controllerOpts{logs: logs, noAddress: true, addresses: []string{}, provisioning: &controller.Provisioning{
		Ports: provisionPorts, ProxyNamespace: controllerNS, ServiceType: corev1.ServiceTypeClusterIP,
		Dedicated: &controller.Dedicated{Image: "ghcr.io/coxswain-labs/coxswain:test", DiscoveryAddress: "coxswain-discovery.coxswain-system.svc:50051",
			TrustBundle: func() []byte { return []byte("bundle") }, ServiceAccount: discovery.DedicatedServiceAccount},
	}})
	ns := namespace(t, e, "drift", nil)
	createClass(t, e, "coxswain", "")
	createFilterObject(t, e, gatewayParametersGVR, infrav1a1.GatewayParametersKind, ns, "pool", map[string]any{"replicas": int64(1)})
	dedicated := func(name string, labels map[gwapiv1.LabelKey]gwapiv1.LabelValue) *gwapiv1.Gateway {
		return infraGateway(t, e, ns, name, &gwapiv1.GatewayInfrastructure{Labels: labels,
			ParametersRef: &gwapiv1.LocalParametersReference{Group: infrav1a1.GroupName, Kind: infrav1a1.GatewayParametersKind, Name: "pool"}},
			nil, httpListener("http", 80))
	}
	edge := dedicated("edge", map[gwapiv1.LabelKey]gwapiv1.LabelValue{"team": "edge", provision.LabelName: "mine"})
	deps, sas := e.Kube.AppsV1().Deployments(ns), e.Kube.CoreV1().ServiceAccounts(ns)
	const name = "coxswain-edge"
	var dep *appsv1.Deployment
	eventually(t, "the Deployment", func() (err error) {
		if dep, err = deps.Get(ctxFor(t), name, metav1.GetOptions{}); err != nil {
			return err
		}
		if err := ownedByGateway(dep, edge); err != nil {
			return err
		}
		return subset(dep.Labels, map[string]string{"team": "edge", provision.LabelName: "coxswain"})
	})
	const dropped = "reserved infrastructure keys dropped"

	t.Run("a reserved label is dropped, named in Accepted, logged at WARN", func(t *testing.T) {
		waitGateway(t, e, ns, "edge", func(gw *gwapiv1.Gateway) error {
			c := meta.FindStatusCondition(gw.Status.Conditions, "Accepted")
			if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "labels."+provision.LabelName) {
				return fmt.Errorf("Accepted %+v names no dropped reserved key", c)
			}
			return nil
		})
		if n := seen.FilterMessage(dropped).FilterField(zap.String("gateway", ns+"/edge")).Len(); n != 1 {
			t.Fatalf("%d WARN lines %q, want 1", n, dropped)
		}
	})

	t.Run("an edited or deleted Deployment is repaired", func(t *testing.T) {
		edited := editLatest(t, func() (*appsv1.Deployment, error) { return deps.Get(ctxFor(t), name, metav1.GetOptions{}) },
			func(d *appsv1.Deployment) {
				d.Spec.Replicas = ptr.To(int32(7))
				d.Spec.Template.Spec.Containers[0].Image = "example.com/not-coxswain:1"
			},
			func(d *appsv1.Deployment) (*appsv1.Deployment, error) {
				return deps.Update(ctxFor(t), d, metav1.UpdateOptions{})
			})
		eventually(t, "the edited Deployment repaired", func() error {
			got, err := deps.Get(ctxFor(t), name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got.Generation == edited.Generation || *got.Spec.Replicas != 1 || got.Spec.Template.Spec.Containers[0].Image != "ghcr.io/coxswain-labs/coxswain:test" {
				return fmt.Errorf("generation %d replicas %d image %s", got.Generation, *got.Spec.Replicas, got.Spec.Template.Spec.Containers[0].Image)
			}
			return nil
		})
		if err := deps.Delete(ctxFor(t), name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitRecreated(t, "Deployment", dep.UID, func() (metav1.Object, error) { return deps.Get(ctxFor(t), name, metav1.GetOptions{}) })
	})

	t.Run("an edited or deleted ServiceAccount is repaired", func(t *testing.T) {
		sa := editLatest(t, func() (*corev1.ServiceAccount, error) { return sas.Get(ctxFor(t), name, metav1.GetOptions{}) },
			func(sa *corev1.ServiceAccount) { sa.AutomountServiceAccountToken = ptr.To(true) },
			func(sa *corev1.ServiceAccount) (*corev1.ServiceAccount, error) {
				return sas.Update(ctxFor(t), sa, metav1.UpdateOptions{})
			})
		eventually(t, "automountServiceAccountToken false again", func() error {
			got, err := sas.Get(ctxFor(t), name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got.AutomountServiceAccountToken == nil || *got.AutomountServiceAccountToken {
				return fmt.Errorf("automountServiceAccountToken %v", got.AutomountServiceAccountToken)
			}
			return nil
		})
		if err := sas.Delete(ctxFor(t), name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitRecreated(t, "ServiceAccount", sa.UID, func() (metav1.Object, error) { return sas.Get(ctxFor(t), name, metav1.GetOptions{}) })
	})

	t.Run("the WARN was logged once, through every repair", func(t *testing.T) {
		if n := seen.FilterMessage(dropped).Len(); n != 1 {
			t.Fatalf("%d WARN lines %q, want 1", n, dropped)
		}
	})

	t.Run("a foreign Deployment is a condition, never overwritten", func(t *testing.T) {
		labels := map[string]string{"app": "mine"}
		foreign, err := deps.Create(ctxFor(t), &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "coxswain-taken"},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "mine", Image: "example.com/mine:1"}}}}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		dedicated("taken", nil)
		waitForeign(t, e, ns, "taken", "Deployment "+ns+"/coxswain-taken exists and is not owned by this Gateway")
		got, err := deps.Get(ctxFor(t), foreign.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Generation != foreign.Generation || len(got.OwnerReferences) != 0 || got.Spec.Template.Spec.Containers[0].Image != "example.com/mine:1" {
			t.Fatalf("foreign Deployment changed: generation %d→%d owners %v", foreign.Generation, got.Generation, got.OwnerReferences)
		}
	})

	t.Run("a foreign ServiceAccount is a condition, never overwritten", func(t *testing.T) {
		foreign, err := sas.Create(ctxFor(t), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "shared-coxswain",
			Labels: map[string]string{"owner": "someone-else"}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		createGateway(t, e, ns, "shared", "coxswain", httpListener("http", 80))
		waitForeign(t, e, ns, "shared", "ServiceAccount "+ns+"/shared-coxswain exists and is not owned by this Gateway")
		got, err := sas.Get(ctxFor(t), foreign.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.ResourceVersion != foreign.ResourceVersion || len(got.OwnerReferences) != 0 {
			t.Fatalf("foreign ServiceAccount changed: %+v", got.ObjectMeta)
		}
	})
}

// waitForeign waits for Gateway ns/name to be Programmed=False NoResources with a message
// containing msg.
func waitForeign(t *testing.T, e *env.Env, ns, name, msg string) {
	t.Helper()
	waitGateway(t, e, ns, name, func(gw *gwapiv1.Gateway) error {
		if err := checkConds(gw.Status.Conditions, gw.Generation, cond{"Programmed", "False", "NoResources"}); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(gw.Status.Conditions, "Programmed"); !strings.Contains(c.Message, msg) {
			return fmt.Errorf("Programmed message %q, want it to say %q", c.Message, msg)
		}
		return nil
	})
}

// waitRecreated waits until get returns an object other than the one with UID old.
func waitRecreated(t *testing.T, kind string, old types.UID, get func() (metav1.Object, error)) {
	t.Helper()
	eventually(t, "the deleted "+kind+" made again", func() error {
		o, err := get()
		if err != nil {
			return err
		}
		if o.GetUID() == old {
			return fmt.Errorf("not deleted yet")
		}
		return nil
	})
}
