package harness

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// ControllerName is the controllerName of the harness's GatewayClass: Coxswain's default.
const ControllerName = "coxswain-labs.dev/gateway-controller"

// startCoxswain runs the product: `coxswain controller`, which serves traffic with its in-process
// proxy and gives every Gateway an address of its own from GatewayPool.
func startCoxswain(t *testing.T, c *Cluster) *process {
	t.Helper()
	return startProcess(t, c.Artifacts, "coxswain", c.Binaries.Coxswain, "controller",
		"--kubeconfig", c.Kubeconfig,
		"--in-process-proxy",
		"--gateway-address-pool", GatewayPool,
		"--leader-elect=false",
		"--health-address", "127.0.0.1:0",
		"--log-format", "console",
	)
}

// GatewayClass creates the GatewayClass name for Coxswain, waits until Coxswain has accepted it,
// and returns it as Coxswain wrote it: status.supportedFeatures is the build's claim.
func (c *Cluster) GatewayClass(t *testing.T, name string) *gwapiv1.GatewayClass {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	classes := c.Env.Gateway.GatewayV1().GatewayClasses()
	_, err := classes.Create(ctx, &gwapiv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: gwapiv1.GatewayClassSpec{
			ControllerName: ControllerName,
			Description:    new("Coxswain under the Gateway API conformance suite"),
		},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	var gc *gwapiv1.GatewayClass
	var last string
	err = wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if done, status := c.Coxswain.exited(); done {
			return false, fmt.Errorf("coxswain exited: %s", status)
		}
		got, err := classes.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		cond := meta.FindStatusCondition(got.Status.Conditions, string(gwapiv1.GatewayClassConditionStatusAccepted))
		if cond == nil || cond.Status != metav1.ConditionTrue || cond.ObservedGeneration != got.Generation {
			last = fmt.Sprintf("Accepted: %+v", cond)
			return false, nil
		}
		gc = got
		return true, nil
	})
	if err != nil {
		t.Fatalf("GatewayClass %s not accepted: %v (last: %s; coxswain log: %s)", name, err, last, c.Coxswain.log)
	}
	return gc
}
