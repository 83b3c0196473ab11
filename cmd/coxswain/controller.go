package main

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwclientset "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/coxswain-labs/coxswain/controller"
	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/core/admin"
)

// stringList is a repeatable flag that also accepts comma-separated values.
type stringList []string

func (s *stringList) String() string { return strings.Join(*s, ",") }

func (s *stringList) Set(v string) error {
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*s = append(*s, p)
		}
	}
	return nil
}

// controllerFlags are the flags of `coxswain controller`.
type controllerFlags struct {
	kubeconfig     string
	qps            float64
	burst          int
	controllerName string
	statusAddress  stringList
	addressPool    string
	holdoff        time.Duration
	maxDelay       time.Duration
	statusWorkers  int
	healthAddress  string
	drain          time.Duration
	le             controller.LeaderElection
	leaderElect    bool
	proxy          proxyFlags // the in-process proxy's limits
	dataPlane      dataPlaneFlags
}

func (c *controllerFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig file; in-cluster config, then $KUBECONFIG and ~/.kube/config when empty")
	fs.Float64Var(&c.qps, "kube-api-qps", 50, "queries per second to the API server (status writes)")
	fs.IntVar(&c.burst, "kube-api-burst", 100, "burst of queries to the API server")
	fs.StringVar(&c.controllerName, "controller-name", translator.DefaultControllerName,
		"the GatewayClass spec.controllerName this coxswain answers to")
	fs.Var(&c.statusAddress, "status-address",
		"address published in every Gateway's status.addresses: an IP or a hostname (repeatable, or comma-separated)")
	fs.StringVar(&c.addressPool, "gateway-address-pool", "",
		"CIDR range: give each Gateway that asks for no address one of its own from it, bound by the proxy and published in status (the range must be routed to this host); excludes --status-address")
	fs.DurationVar(&c.holdoff, "holdoff", 75*time.Millisecond, "how long changes must settle before a translation")
	fs.DurationVar(&c.maxDelay, "max-delay", time.Second, "the longest a change waits for a translation in a busy cluster")
	fs.IntVar(&c.statusWorkers, "status-workers", 4, "objects whose status is written concurrently")
	fs.StringVar(&c.healthAddress, "admin-address", ":9902",
		"address of /healthz, /readyz, /metrics, /api/v1/health and /api/v1/fleet; empty disables them")
	fs.StringVar(&c.healthAddress, "health-address", ":9902", "the former name of --admin-address")
	c.dataPlane.register(fs)
	fs.DurationVar(&c.drain, "shutdown-timeout", 15*time.Second, "how long in-flight requests may finish on shutdown")
	fs.BoolVar(&c.leaderElect, "leader-elect", true, "elect a leader on a Lease; only the leader serves, publishes and writes status")
	fs.StringVar(&c.le.Namespace, "leader-election-namespace", "", "namespace of the Lease; the controller's own when empty")
	fs.StringVar(&c.le.Name, "leader-election-id", "coxswain-controller", "name of the Lease")
	fs.StringVar(&c.le.Identity, "leader-election-identity", "", "this replica's identity in the Lease; $POD_NAME, else the hostname with a unique suffix, when empty")
	fs.DurationVar(&c.le.LeaseDuration, "lease-duration", 15*time.Second, "how long a standby waits before taking an unrenewed Lease")
	fs.DurationVar(&c.le.RenewDeadline, "renew-deadline", 10*time.Second, "how long the leader retries renewing before giving up")
	fs.DurationVar(&c.le.RetryPeriod, "retry-period", 2*time.Second, "how often candidates try to acquire or renew the Lease")
	c.proxy.register(fs)
}

// runController runs `coxswain controller` until SIGINT or SIGTERM.
func runController(args []string, e *env) int {
	fs := newFlagSet("controller", "[flags]", e)
	var cf controllerFlags
	var lf logFlags
	cf.register(fs)
	lf.register(fs)
	if code, ok := parse(fs, args); !ok {
		return code
	}
	addrs, err := controller.ParseAddresses(cf.statusAddress)
	if err != nil {
		fmt.Fprintf(e.stderr, "coxswain controller: --status-address: %v\n", err)
		return 2
	}
	var pool netip.Prefix
	if cf.addressPool != "" {
		if pool, err = netip.ParsePrefix(cf.addressPool); err != nil {
			fmt.Fprintf(e.stderr, "coxswain controller: --gateway-address-pool: %v\n", err)
			return 2
		}
		if len(addrs) > 0 {
			fmt.Fprintln(e.stderr, "coxswain controller: --gateway-address-pool and --status-address are exclusive")
			return 2
		}
	}
	log, err := newLogger(lf.format, lf.level, e.stderr)
	if err != nil {
		fmt.Fprintf(e.stderr, "coxswain controller: %v\n", err)
		return 2
	}
	defer func() { _ = log.Sync() }()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := cf.run(ctx, log, e, addrs, pool); err != nil {
		log.Error("coxswain controller failed", zap.Error(err))
		return 1
	}
	return 0
}

func (cf *controllerFlags) run(ctx context.Context, log *zap.Logger, e *env, addrs []gwapiv1.GatewayStatusAddress, pool netip.Prefix) error {
	cfg, err := restConfig(cf.kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = float32(cf.qps), cf.burst
	cfg.UserAgent = "coxswain-controller"
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	gw, err := gwclientset.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("gateway-api client: %w", err)
	}
	le := cf.le
	le.Disabled = !cf.leaderElect
	metrics := admin.NewRegistry()
	dp, err := cf.dataPlane.start(ctx, log, kube, e.reg, cf.proxy.limits(), metrics)
	if err != nil {
		return err
	}
	defer dp.stop()
	ctrl, err := controller.New(controller.Options{
		Log: log.Named("controller"), Kube: kube, Gateway: gw, REST: cfg, Registry: e.reg,
		NewPublisher:   dp.newPublisher,
		ControllerName: cf.controllerName, StatusAddresses: addrs, AddressPool: pool,
		Holdoff: cf.holdoff, MaxDelay: cf.maxDelay, StatusWorkers: cf.statusWorkers, ShutdownTimeout: cf.drain,
		LeaderElection: le,
	})
	if err != nil {
		return err
	}
	if cf.healthAddress != "" {
		srv, err := serveAdmin(cf.healthAddress, ctrl, dp, metrics, log)
		if err != nil {
			return err
		}
		defer func() { _ = srv.Close() }()
	}
	return ctrl.Run(ctx)
}

// restConfig is the in-cluster config, or the kubeconfig at path, $KUBECONFIG or ~/.kube/config.
func restConfig(path string) (*rest.Config, error) {
	if path == "" {
		if cfg, err := rest.InClusterConfig(); err == nil {
			return cfg, nil
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading the Kubernetes client config: %w", err)
	}
	return cfg, nil
}
