// Package harness brings up the whole stack the conformance suite runs against, with no container
// runtime, inside the private network namespace of the test binary (test/integration/netns):
// etcd and kube-apiserver (test/integration/env), kube-controller-manager, the process kubelet
// (../kubelet), the service proxy (../serviceproxy) and Coxswain: a `coxswain controller`
// process and the `coxswain proxy` it streams snapshots to over the discovery protocol, plus a
// GatewayClass it has accepted.
//
// Addresses, all local to the namespace:
//
//	10.99.255.254        the node: kubelet API (:10250) and the node's InternalIP
//	10.244.0.0/16        pods, behind the bridge cxpods0 (10.244.0.1), one network namespace each
//	10.96.0.0/16         Service cluster IPs, translated to endpoints by the service proxy
//	10.250.0.0/24        pool mode only: Gateway addresses, routed to lo so Coxswain can bind any
package harness

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/coxswain-labs/coxswain/test/conformance/kubelet"
	"github.com/coxswain-labs/coxswain/test/conformance/serviceproxy"
	"github.com/coxswain-labs/coxswain/test/integration/env"
	"github.com/coxswain-labs/coxswain/test/integration/netns"
)

// The cluster's fixed addresses and names.
const (
	PodRange    = "10.244.0.0/16"
	GatewayPool = "10.250.0.0/24"
	// StaticRange is local like GatewayPool but not the pool's: Gateways that name an address of
	// it in spec.addresses (GatewayStaticAddresses) bind it, and the pool never hands it out.
	StaticRange = "10.250.1.0/24"
	// UsableAddress is the suite's usable static address in pool mode: in StaticRange.
	UsableAddress = "10.250.1.10"
	// SharedUsableAddress is the suite's usable static address in shared mode, where a static
	// IPAddress pins the VIP Service's cluster IP: in ServiceCIDR, in the low band the API
	// server keeps for static assignment (its dynamic allocations take the rest first), so no
	// Service of the suite has taken it when the test asks for it.
	SharedUsableAddress = "10.96.0.250"
	// UnusableAddress is the suite's unusable static address: TEST-NET-1 (RFC 5737), which
	// nothing in the namespace holds or routes, so binding it fails (EADDRNOTAVAIL) and no packet
	// for it can leave the namespace.
	UnusableAddress = "192.0.2.10"
	ServiceCIDR     = "10.96.0.0/16"
	NodeName        = "conformance-node"
	KubeletPort     = 10250
	podBridge       = "cxpods0"
	// podGateway is the bridge's address: where pods reach processes of the harness.
	podGateway = "10.244.0.1"
	// ProxyImageRepository is the image the provisioning controller runs dedicated proxies from.
	ProxyImageRepository = "ghcr.io/coxswain-labs/coxswain"
)

// EnvArtifacts names the directory that receives the logs of a run (kube-controller-manager,
// kubelet, coxswain); a temp dir when unset.
const EnvArtifacts = "COXSWAIN_CONFORMANCE_ARTIFACTS"

// EnvChannel names the Gateway API release channel whose CRDs the cluster runs: "standard" (the
// default: deploy/crds, the v1.7.0 standard channel as released) or "experimental" (the
// config/crd/experimental of the gateway-api module the test module requires).
const EnvChannel = "COXSWAIN_CONFORMANCE_CHANNEL"

// Channel is the Gateway API release channel of the run: EnvChannel, standard when unset.
func Channel() string {
	if c := os.Getenv(EnvChannel); c != "" {
		return c
	}
	return "standard"
}

// gatewayAPI is the env option that installs the channel's CRDs.
func gatewayAPI(t *testing.T, channel string) env.Option {
	t.Helper()
	switch channel {
	case "standard":
		// What users install (deploy/crds), which is the module's standard channel byte for byte.
		return env.WithGatewayAPIDir("deploy/crds")
	case "experimental":
		return env.WithChannel("experimental")
	}
	t.Fatalf("%s=%q: want standard or experimental", EnvChannel, channel)
	return nil
}

// Cluster is a running stack.
type Cluster struct {
	// Channel is the Gateway API release channel of the installed CRDs.
	Channel    string
	Env        *env.Env
	Kubeconfig string
	Artifacts  string
	Binaries   Binaries
	Coxswain   *Coxswain
	// Provisioning is how Gateways get addresses: ProvisioningShared or ProvisioningPool.
	Provisioning string
	// UsableAddress is the static address Gateways can have in this mode (the suite's
	// UsableNetworkAddresses); UnusableAddress is unusable in both.
	UsableAddress string
}

// Start brings up the control plane, the node and Coxswain; everything stops when t ends.
func Start(t *testing.T) *Cluster {
	t.Helper()
	return start(t, startCoxswain)
}

// StartProvisioning brings up the control plane, the node and a Coxswain controller that
// provisions Gateways (shared and dedicated mode, StartProvisioningController) and no proxy of
// its own: a dedicated Gateway's proxies are the pods of the Deployment it provisions, which the
// kubelet runs from the coxswain binary.
func StartProvisioning(t *testing.T) *Cluster {
	t.Helper()
	return start(t, startProvisioningController)
}

func start(t *testing.T, coxswain func(*testing.T, *Cluster) *Coxswain) *Cluster {
	t.Helper()
	began := time.Now()
	artifacts := os.Getenv(EnvArtifacts)
	if artifacts == "" {
		artifacts = t.TempDir()
	}
	if err := os.MkdirAll(artifacts, 0o755); err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Channel: Channel(), Artifacts: artifacts, Binaries: binaries(t),
		Provisioning: Provisioning(), UsableAddress: SharedUsableAddress}
	t.Logf("harness: binaries ready (%s)", time.Since(began).Round(time.Millisecond))
	if c.Provisioning == ProvisioningPool {
		c.UsableAddress = UsableAddress
		for _, cidr := range []string{GatewayPool, StaticRange} {
			if err := localRoute(cidr); err != nil {
				t.Fatal(err)
			}
		}
	}
	c.Env = env.Start(t, gatewayAPI(t, c.Channel), env.WithAPIServerFlag("service-cluster-ip-range", ServiceCIDR))
	c.Kubeconfig = c.Env.WriteKubeConfig(t)
	startKCM(t, c)
	startKubelet(t, c)
	startServiceProxy(t, c)
	c.Coxswain = coxswain(t, c)
	t.Logf("harness: cluster up (Gateway API %s channel, %s provisioning) in %s; logs in %s",
		c.Channel, c.Provisioning, time.Since(began).Round(time.Millisecond), artifacts)
	return c
}

func startKubelet(t *testing.T, c *Cluster) {
	t.Helper()
	log := fileLogger(t, filepath.Join(c.Artifacts, "kubelet.log"))
	nw := &kubelet.Network{Bridge: podBridge, Prefix: netip.MustParsePrefix(PodRange)}
	ctx, cancel := context.WithCancel(context.Background())
	if err := nw.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	k, err := kubelet.New(kubelet.Config{
		Client: c.Env.Kube, Log: log, NodeName: NodeName, NodeIP: netip.MustParseAddr(netns.HostIP), Port: KubeletPort,
		Network: nw,
		Workloads: kubelet.Catalog{
			"registry.k8s.io/gateway-api/echo-basic": kubelet.EchoBasic(c.Binaries.EchoBasic),
			// v1.7.0 moved echo-basic to its own repository and image name.
			"registry.k8s.io/gateway-api/conformance/echo-basic": kubelet.EchoBasic(c.Binaries.EchoBasic),
			"registry.k8s.io/coredns/coredns":                    kubelet.DNSResponder(c.Binaries.DNSResponder),
			// Coxswain's image (the chart's, --proxy-image's default) is the binary under test.
			ProxyImageRepository: kubelet.CoxswainProxy(c.Binaries.Coxswain),
		},
		Dir: filepath.Join(c.Artifacts, "pods"),
	})
	if err != nil {
		t.Fatal(err)
	}
	wait, err := k.Run(ctx, 8)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		wait()
		_ = log.Sync()
	})
}

// startServiceProxy makes cluster IPs work for connections from the harness's namespace, where
// the suite's clients run: a shared Gateway's address is its VIP Service's cluster IP.
func startServiceProxy(t *testing.T, c *Cluster) {
	t.Helper()
	log := fileLogger(t, filepath.Join(c.Artifacts, "serviceproxy.log"))
	ctx, cancel := context.WithCancel(context.Background())
	p := &serviceproxy.Proxy{Client: c.Env.Kube, ServiceCIDR: netip.MustParsePrefix(ServiceCIDR), Log: log,
		RulesetFile: filepath.Join(c.Artifacts, "serviceproxy.nft")}
	wait, err := p.Run(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		wait()
		_ = log.Sync()
	})
}

// fileLogger writes JSON lines to path.
func fileLogger(t testing.TB, path string) *zap.Logger {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	enc := zap.NewDevelopmentEncoderConfig()
	return zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.AddSync(f), zap.DebugLevel))
}
