package harness

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// kcmControllers are the controllers of kube-controller-manager the suite's objects need:
// Deployments make ReplicaSets make Pods (named <deployment>-<hash>-<random>, which the weight
// tests rely on), Services get EndpointSlices, deleted owners take their dependents along,
// deleted namespaces are emptied, and every namespace gets its default ServiceAccount.
var kcmControllers = "deployment,replicaset,endpointslice,garbagecollector,namespace,serviceaccount"

// startKCM runs kube-controller-manager (built by test/integration/env/build.sh --with-kcm) and
// waits until it has created the default ServiceAccount, the sign that its controllers run.
func startKCM(t *testing.T, c *Cluster) {
	t.Helper()
	bin := filepath.Join(c.Env.BinDir, "kube-controller-manager")
	p := startProcess(t, c.Artifacts, "kube-controller-manager", bin,
		"--kubeconfig", c.Kubeconfig,
		"--controllers", kcmControllers,
		"--leader-elect=false",
		"--secure-port=0",
		"--use-service-account-credentials=false",
		"--kube-api-qps=200", "--kube-api-burst=400",
		"--concurrent-deployment-syncs=10", "--concurrent-replicaset-syncs=10",
		"--concurrent-service-endpoint-syncs=10", "--concurrent-namespace-syncs=10",
		"--endpointslice-updates-batch-period=0s",
	)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if done, status := p.exited(); done {
			return false, fmt.Errorf("kube-controller-manager exited: %s", status)
		}
		_, err := c.Env.Kube.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("kube-controller-manager not working: %v (log: %s)", err, p.log)
	}
}
