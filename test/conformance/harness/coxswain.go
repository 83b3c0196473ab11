package harness

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Coxswain's side of the cluster: the controller's namespace (its discovery CA Secret and trust
// bundle ConfigMap) and the ServiceAccount whose token makes a proxy a shared proxy.
const (
	ControllerName  = "coxswain-labs.dev/gateway-controller"
	coxswainNS      = "coxswain-system"
	proxySA         = "coxswain-proxy"
	discoveryAud    = "coxswain-discovery" // core/discovery/svid.Audience
	trustBundleCM   = "coxswain-discovery-trust-bundle"
	trustBundleKey  = "ca.crt"
	proxyNodeName   = "conformance-proxy"
	proxyTokenHours = 2
)

// Coxswain is the product under test: a `coxswain controller` process streaming snapshots over
// the discovery protocol to `coxswain proxy` processes: the shared pool's pod (shared mode) or a
// process of the harness binding every Gateway's listeners on its pool address (pool mode).
type Coxswain struct {
	Controller *process
	Proxy      *process // the pool mode's proxy process; in shared mode the proxies are pods
	discovery  string   // the controller's discovery endpoint, host:port
}

// EnvProvisioning picks how the conformance stack gives Gateways their addresses (see
// startCoxswain): "shared" (the default, what a cluster runs: the controller publishes the
// shared pool's pods as every VIP Service's EndpointSlice) or "pool".
const EnvProvisioning = "COXSWAIN_CONFORMANCE_PROVISIONING"

// The values of EnvProvisioning.
const (
	// ProvisioningShared runs the controller as in a cluster: every Gateway gets a VIP Service
	// (ClusterIP) whose targetPorts are the Gateway's internal ports on the shared proxy pool,
	// a Deployment the kubelet runs; the harness's service proxy routes the cluster IPs.
	ProvisioningShared = "shared"
	// ProvisioningPool runs the controller with --gateway-address-pool GatewayPool: each Gateway
	// gets a pool address that a shared proxy process of the harness binds (no Services).
	ProvisioningPool = "pool"
)

// Provisioning is EnvProvisioning's value, shared when unset.
func Provisioning() string {
	if p := os.Getenv(EnvProvisioning); p != "" {
		return p
	}
	return ProvisioningShared
}

// startCoxswain starts Coxswain in the mode Provisioning names.
func startCoxswain(t *testing.T, c *Cluster) *Coxswain {
	t.Helper()
	switch p := Provisioning(); p {
	case ProvisioningShared:
		c.Coxswain = startProvisioningController(t, c)
		deploySharedProxy(t, c, c.Coxswain.discovery)
		return c.Coxswain
	case ProvisioningPool:
		return startPoolCoxswain(t, c)
	default:
		t.Fatalf("%s=%q: want %s or %s", EnvProvisioning, p, ProvisioningShared, ProvisioningPool)
		return nil
	}
}

// startPoolCoxswain runs the controller with the address pool, then a shared proxy process
// holding what its pod would have mounted: a projected ServiceAccount token for the discovery
// audience and the trust bundle. The proxy binds each Gateway's listeners on the Gateway's pool
// (or static) address, which is local to the harness's namespace.
func startPoolCoxswain(t *testing.T, c *Cluster) *Coxswain {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kube := c.Env.Kube
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: coxswainNS}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().ServiceAccounts(coxswainNS).Create(ctx, &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: proxySA}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	discovery := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	args := []string{"controller", "--kubeconfig", c.Kubeconfig, "--gateway-address-pool", GatewayPool,
		"--leader-elect=false",
		"--namespace", coxswainNS,
		"--discovery-address", discovery,
		"--discovery-server-name", "127.0.0.1",
		"--admin-address", "127.0.0.1:0",
		"--log-format", "console",
	}
	ctrl := startProcess(t, c.Artifacts, "coxswain-controller", c.Binaries.Coxswain, args...)

	dir := filepath.Join(c.Artifacts, "proxy")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	token, bundle := filepath.Join(dir, "token"), filepath.Join(dir, "ca.crt")
	exp := int64(proxyTokenHours * 3600)
	tr, err := kube.CoreV1().ServiceAccounts(coxswainNS).CreateToken(ctx, proxySA, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{discoveryAud}, ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, token, tr.Status.Token)
	var ca string
	err = wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if done, status := ctrl.exited(); done {
			return false, fmt.Errorf("coxswain controller exited: %s", status)
		}
		cm, err := kube.CoreV1().ConfigMaps(coxswainNS).Get(ctx, trustBundleCM, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		ca = cm.Data[trustBundleKey]
		return ca != "", nil
	})
	if err != nil {
		t.Fatalf("trust bundle %s/%s: %v (log: %s)", coxswainNS, trustBundleCM, err, ctrl.log)
	}
	writeFile(t, bundle, ca)
	px := startProcess(t, c.Artifacts, "coxswain-proxy", c.Binaries.Coxswain, "proxy",
		"--discovery-address", discovery,
		"--token-file", token,
		"--trust-bundle", bundle,
		"--node-name", proxyNodeName,
		"--admin-address", "127.0.0.1:0",
		"--log-format", "console",
	)
	return &Coxswain{Controller: ctrl, Proxy: px}
}

// startProvisioningController runs a controller that provisions Gateways as in a cluster
// (--gateway-provisioning=shared, which includes the dedicated mode), with its discovery
// endpoint on the pod bridge so that provisioned proxy pods reach it. It starts no proxy.
func startProvisioningController(t *testing.T, c *Cluster) *Coxswain {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.Env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: coxswainNS}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	discovery := net.JoinHostPort(podGateway, strconv.Itoa(freePort(t)))
	ctrl := startProcess(t, c.Artifacts, "coxswain-controller", c.Binaries.Coxswain, "controller",
		"--kubeconfig", c.Kubeconfig,
		"--gateway-provisioning", "shared",
		"--gateway-service-type", "ClusterIP",
		"--proxy-image", ProxyImageRepository+":e2e",
		"--leader-elect=false",
		"--namespace", coxswainNS,
		"--discovery-address", discovery,
		"--dedicated-discovery-address", discovery,
		"--discovery-server-name", podGateway,
		"--admin-address", "127.0.0.1:0",
		"--log-format", "console",
	)
	return &Coxswain{Controller: ctrl, discovery: discovery}
}

// Logs are the paths of the processes' logs.
func (x *Coxswain) Logs() string {
	logs := x.Controller.log
	if x.Proxy != nil {
		logs += ", " + x.Proxy.log
	}
	return logs
}

// exited reports whether either process has ended.
func (x *Coxswain) exited() (bool, string) {
	for _, p := range []*process{x.Controller, x.Proxy} {
		if p == nil {
			continue
		}
		if done, status := p.exited(); done {
			return true, p.name + " " + status
		}
	}
	return false, ""
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
		t.Fatalf("GatewayClass %s not accepted: %v (last: %s; logs: %s)", name, err, last, c.Coxswain.Logs())
	}
	return gc
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// freePort is a TCP port nothing listens on right now (on loopback, inside the namespace).
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
