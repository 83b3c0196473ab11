package coxswaincmd

import (
	"flag"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"go.uber.org/fx"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwclientset "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/coxswain-labs/coxswain/cmd/proxycmd"
	"github.com/coxswain-labs/coxswain/controller"
	"github.com/coxswain-labs/coxswain/controller/adminapi"
	"github.com/coxswain-labs/coxswain/controller/provision"
	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/core"
)

// controllerConfig is the parsed command line of `coxswain controller`.
type controllerConfig struct {
	acme           clusterACMEFlags
	kubeconfig     string
	qps            float64
	burst          int
	compression    bool // --kube-api-compression
	controllerName string
	statusAddress  proxycmd.StringList
	addressPool    string
	provisioning   string
	serviceType    string
	proxySelector  string
	portRange      string
	holdoff        time.Duration
	maxDelay       time.Duration
	statusWorkers  int
	healthAddress  string
	adminAuth      string
	adminPprof     bool
	drain          time.Duration
	le             controller.LeaderElection
	leaderElect    bool
	proxy          proxycmd.ProxyFlags // the in-process proxy's limits
	memory         proxycmd.MemoryFlags
	gc             gcPercent
	dataPlane      dataPlaneFlags
	dedicatedMode  dedicatedFlags
	log            proxycmd.LogFlags
	session        sessionKeyFlag
	ingress        ingressFlags
	// ingressStatusService is --ingress-status-service; ingressService the parsed value.
	ingressStatusService string
	ingressService       types.NamespacedName

	// Parsed from the flags above by check.
	addrs      []gwapiv1.GatewayStatusAddress
	pool       netip.Prefix
	provision  *controller.Provisioning // nil: no objects provisioned
	sessionKey []byte                   // nil: derived from the discovery CA, or random with --in-process-proxy
}

func (c *controllerConfig) register(fs *flag.FlagSet) {
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig file; in-cluster config, then $KUBECONFIG and ~/.kube/config when empty")
	fs.Float64Var(&c.qps, "kube-api-qps", 50, "queries per second to the API server (status writes)")
	fs.IntVar(&c.burst, "kube-api-burst", 100, "burst of queries to the API server")
	fs.BoolVar(&c.compression, "kube-api-compression", false,
		"ask the API server for gzip-compressed responses: for a controller far from its API server over a slow link; off, the default, spares both ends the compression's CPU and the controller its pooled gzip readers (docs/controller.md)")
	fs.StringVar(&c.controllerName, "controller-name", translator.DefaultControllerName,
		"the GatewayClass spec.controllerName this coxswain answers to")
	fs.Var(&c.statusAddress, "status-address",
		"address published in status.addresses of every Gateway not provisioned, and of a provisioned one whose Service has no address: an IP or a hostname (repeatable, or comma-separated)")
	fs.StringVar(&c.addressPool, "gateway-address-pool", "",
		"CIDR range: give each Gateway that asks for no address one of its own from it, bound by the proxy and published in status (the range must be routed to this host); excludes --status-address")
	fs.StringVar(&c.provisioning, "gateway-provisioning", "auto",
		"shared: give each Gateway a VIP Service in front of the shared proxy pool (docs/provisioning.md); none: provision nothing, proxies bind the listener ports; auto: shared, except with --gateway-address-pool or --in-process-proxy")
	fs.StringVar(&c.serviceType, "gateway-service-type", string(corev1.ServiceTypeLoadBalancer),
		"type of the shared mode's VIP Services when the GatewayClass's parameters set none: LoadBalancer, NodePort or ClusterIP")
	fs.StringVar(&c.proxySelector, "shared-proxy-selector", provision.DefaultProxySelector,
		"labels of the shared proxy pool's pods (in --namespace), which the controller publishes as every VIP Service's endpoints")
	fs.StringVar(&c.portRange, "internal-port-range", fmt.Sprintf("%d-%d", provision.DefaultPortRange.First, provision.DefaultPortRange.Last),
		"ports the shared proxies bind Gateway listeners on (FIRST-LAST); nothing else in the proxy pods may use them")
	fs.DurationVar(&c.holdoff, "holdoff", 25*time.Millisecond, "the first gap between translations in a burst of changes (it doubles while the burst lasts); a lone change is translated at once")
	fs.DurationVar(&c.maxDelay, "max-delay", time.Second, "the largest gap between translations: the longest a change waits in a busy cluster")
	fs.IntVar(&c.statusWorkers, "status-workers", 4, "objects whose status is written concurrently")
	fs.StringVar(&c.healthAddress, "admin-address", ":9902",
		"address of /healthz, /readyz, /metrics and the /api/v1 admin API (docs/admin-api.md); empty disables them")
	fs.StringVar(&c.healthAddress, "health-address", ":9902", "the former name of --admin-address")
	fs.StringVar(&c.adminAuth, "admin-auth", adminapi.AuthAuto,
		"who may read /api/v1 on the admin address: kubernetes (a bearer token checked with TokenReview, and a SubjectAccessReview for get on the path), none, or auto (none on a loopback address, kubernetes otherwise); /healthz, /readyz and /metrics are always open")
	fs.BoolVar(&c.adminPprof, "admin-pprof", false,
		"serve the Go runtime's profiles (net/http/pprof) under /api/v1/debug/pprof/ on the admin address, behind --admin-auth: heap, CPU, goroutines")
	c.dataPlane.register(fs)
	c.dedicatedMode.register(fs)
	fs.DurationVar(&c.drain, "shutdown-timeout", 15*time.Second, "how long in-flight requests may finish on shutdown")
	c.acme.register(fs)
	fs.BoolVar(&c.leaderElect, "leader-elect", true, "elect a leader on a Lease; only the leader serves, publishes and writes status")
	fs.StringVar(&c.le.Namespace, "leader-election-namespace", "", "namespace of the Lease; the controller's own when empty")
	fs.StringVar(&c.le.Name, "leader-election-id", "coxswain-controller", "name of the Lease")
	fs.StringVar(&c.le.Identity, "leader-election-identity", "", "this replica's identity in the Lease; $POD_NAME, else the hostname with a unique suffix, when empty")
	fs.DurationVar(&c.le.LeaseDuration, "lease-duration", 15*time.Second, "how long a standby waits before taking an unrenewed Lease")
	fs.DurationVar(&c.le.RenewDeadline, "renew-deadline", 10*time.Second, "how long the leader retries renewing before giving up")
	fs.DurationVar(&c.le.RetryPeriod, "retry-period", 2*time.Second, "how often candidates try to acquire or renew the Lease")
	c.proxy.Register(fs)
	c.memory.RegisterLimit(fs)
	c.gc.register(fs)
	c.log.Register(fs)
	c.ingress.register(fs)
	fs.StringVar(&c.ingressStatusService, "ingress-status-service", "",
		"NAMESPACE/NAME of the Service in front of the proxies: every Ingress's status.loadBalancer publishes its load-balancer ingress, else its cluster IP (--status-address wins)")
	c.session.register(fs, "without it the key is derived from the discovery CA, which every replica shares (with --in-process-proxy: a random key per process)")
}

// check parses the address flags; the message names the flag at fault.
func (c *controllerConfig) check() error {
	var err error
	if c.addrs, err = controller.ParseAddresses(c.statusAddress); err != nil {
		return fmt.Errorf("--status-address: %w", err)
	}
	switch c.adminAuth {
	case adminapi.AuthAuto, adminapi.AuthNone, adminapi.AuthKubernetes:
	default:
		return fmt.Errorf("--admin-auth: %q is not auto, none or kubernetes", c.adminAuth)
	}
	if c.sessionKey, err = c.session.key(); err != nil {
		return err
	}
	if err := c.checkProvisioning(); err != nil {
		return err
	}
	if err := c.ingress.check(); err != nil {
		return err
	}
	if c.ingressStatusService != "" {
		ns, name, ok := strings.Cut(c.ingressStatusService, "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return fmt.Errorf("--ingress-status-service %q: not NAMESPACE/NAME", c.ingressStatusService)
		}
		c.ingressService = types.NamespacedName{Namespace: ns, Name: name}
	}
	if c.addressPool == "" {
		return nil
	}
	if c.pool, err = netip.ParsePrefix(c.addressPool); err != nil {
		return fmt.Errorf("--gateway-address-pool: %w", err)
	}
	if len(c.addrs) > 0 {
		return fmt.Errorf("--gateway-address-pool and --status-address are exclusive")
	}
	return nil
}

// runController runs `coxswain controller` until SIGINT or SIGTERM.
func runController(args []string, e *proxycmd.Env) int {
	fs := proxycmd.NewFlagSet("controller", "[flags]", e)
	var cc controllerConfig
	cc.register(fs)
	if code, ok := proxycmd.Parse(fs, args); !ok {
		return code
	}
	if err := cc.check(); err != nil {
		fmt.Fprintf(e.Stderr, "coxswain controller: %v\n", err)
		return 2
	}
	log, err := proxycmd.NewLogger(cc.log.Format, cc.log.Level, e.Stderr)
	if err != nil {
		fmt.Fprintf(e.Stderr, "coxswain controller: %v\n", err)
		return 2
	}
	if err := cc.memory.SetLimit(log); err != nil {
		fmt.Fprintf(e.Stderr, "coxswain controller: %v\n", err)
		return 2
	}
	cc.gc.apply(log)
	var appLog *zap.Logger
	app := fx.New(
		proxycmd.ConfigModule(e, cc.log, proxycmd.EngineConfig{Limits: cc.proxy.Limits(), Settings: cc.proxy.Settings(), Drain: cc.drain}, fx.Supply(&cc)),
		proxycmd.LoggerModule(e.Stderr),
		proxycmd.MetricsModule(),
		fx.Module("kubernetes", fx.Provide(newKubeClients)),
		proxycmd.AdminModule(),
		dataPlaneModule(),
		controllerModule(),
		fx.Invoke(serveControllerAdmin),
		fx.Populate(&appLog),
		// The data plane's CA is read or created at start, against the API server.
		fx.StartTimeout(time.Minute),
		proxycmd.StopTimeout(cc.drain),
	)
	return proxycmd.RunApp(app, &appLog, "coxswain controller", e.Stderr)
}

// controllerModule is the translator, its Store and informers, the status writer and leader
// election. The last three live inside controller.Controller: a leadership term creates the
// status writer and the publisher and ends with them, so they are not process singletons fx
// could own; the process-level component is the Controller, started and stopped as one.
func controllerModule() fx.Option {
	return fx.Module("controller",
		fx.Provide(newController),
		fx.Provide(fx.Annotate(controllerCollectors, fx.ResultTags(`group:"collectors,flatten"`))),
		fx.Invoke(func(lc fx.Lifecycle, sd fx.Shutdowner, log *zap.Logger, ctrl *controller.Controller) {
			proxycmd.Background(lc, sd, log, "coxswain controller", ctrl.Run)
		}),
	)
}

type kubeClients struct {
	rest    *rest.Config
	kube    kubernetes.Interface
	gateway gwclientset.Interface
}

func newKubeClients(cc *controllerConfig) (kubeClients, error) {
	cfg, err := restConfig(cc.kubeconfig)
	if err != nil {
		return kubeClients{}, err
	}
	cfg.QPS, cfg.Burst = float32(cc.qps), cc.burst
	// As Kubernetes' own control plane does (kubernetes#80919): next to the API server, gzip
	// costs CPU on both ends and saves a transfer that takes no time.
	cfg.DisableCompression = !cc.compression
	cfg.UserAgent = "coxswain-controller"
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return kubeClients{}, fmt.Errorf("kubernetes client: %w", err)
	}
	gw, err := gwclientset.NewForConfig(cfg)
	if err != nil {
		return kubeClients{}, fmt.Errorf("gateway-api client: %w", err)
	}
	return kubeClients{rest: cfg, kube: kube, gateway: gw}, nil
}

func newController(cc *controllerConfig, reg *core.Registry, log *zap.Logger, kc kubeClients, dp *dataPlane) (*controller.Controller, error) {
	le := cc.le
	le.Disabled = !cc.leaderElect
	prov := cc.provision
	if prov != nil {
		d, err := cc.dedicated(&dp.trustBundle)
		if err != nil {
			return nil, err
		}
		p := *prov
		p.Dedicated = d
		prov = &p
	}
	return controller.New(controller.Options{
		Log: log.Named("controller"), Kube: kc.kube, Gateway: kc.gateway, REST: kc.rest, Registry: reg,
		NewPublisher:   dp.NewPublisher,
		SessionKey:     dp.SessionKey,
		ControllerName: cc.controllerName, StatusAddresses: cc.addrs, AddressPool: cc.pool, Provisioning: prov,
		Holdoff: cc.holdoff, MaxDelay: cc.maxDelay, StatusWorkers: cc.statusWorkers, ShutdownTimeout: cc.drain,
		LeaderElection: le, KindSettings: cc.ingress.settings(), ACME: cc.acme.options(),
		IngressStatusService: cc.ingressService,
	})
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
