package coxswaincmd

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"
	"go.uber.org/zap"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/cmd/proxycmd"
	"github.com/coxswain-labs/coxswain/controller"
	"github.com/coxswain-labs/coxswain/controller/adminapi"
	"github.com/coxswain-labs/coxswain/controller/console"
	"github.com/coxswain-labs/coxswain/controller/discovery"
	"github.com/coxswain-labs/coxswain/controller/inprocess"
	"github.com/coxswain-labs/coxswain/controller/status"
	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/core/admin"
	"github.com/coxswain-labs/coxswain/core/discovery/svid"
	policyv1a1 "github.com/coxswain-labs/coxswain/modules/api/policy/v1alpha1"
)

// dataPlaneFlags choose where the controller's snapshots go: to proxy processes over the
// discovery protocol (the default), or to a proxy inside the controller (--in-process-proxy).
type dataPlaneFlags struct {
	inProcess       bool
	address         string
	namespace       string
	trustDomain     string
	caSecret        string
	caCertFile      string
	caKeyFile       string
	bundleConfigMap string
	svidTTL         time.Duration
	sharedProxies   proxycmd.StringList
	serverNames     proxycmd.StringList
}

func (d *dataPlaneFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&d.inProcess, "in-process-proxy", false,
		"serve traffic from a proxy inside the controller process instead of streaming snapshots to proxies (single-process setups and tests)")
	fs.StringVar(&d.address, "discovery-address", ":50051",
		"address of the discovery endpoint (mutual TLS; SVID bootstrap on every replica, snapshot streams on the leader)")
	fs.StringVar(&d.namespace, "namespace", "", "namespace of the CA Secret and the trust-bundle ConfigMap; the controller's own when empty")
	fs.StringVar(&d.trustDomain, "trust-domain", "cluster.local", "SPIFFE trust domain of the SVIDs issued to proxies")
	fs.StringVar(&d.caSecret, "ca-secret", "coxswain-discovery-ca", "Secret holding the self-managed CA (created when missing)")
	fs.StringVar(&d.caCertFile, "ca-cert-file", "", "an operator-provided CA certificate (PEM), instead of the self-managed one")
	fs.StringVar(&d.caKeyFile, "ca-key-file", "", "the operator-provided CA's private key (PEM)")
	fs.StringVar(&d.bundleConfigMap, "trust-bundle-configmap", "coxswain-discovery-trust-bundle",
		"ConfigMap the CA certificate is published in (key ca.crt), for proxies to mount")
	fs.DurationVar(&d.svidTTL, "svid-ttl", time.Hour, "lifetime of an SVID issued to a proxy; proxies renew at half")
	fs.Var(&d.sharedProxies, "shared-proxy-service-account",
		`namespace/name of a ServiceAccount whose proxies may run in shared mode (repeatable); "<namespace>/coxswain-proxy" when unset`)
	fs.Var(&d.serverNames, "discovery-server-name",
		`DNS name or IP put in the discovery serving certificate (repeatable); "coxswain-discovery.<namespace>.svc" when unset`)
}

// dataPlaneModule is where the controller's snapshots go: the discovery server (its CA, trust
// bundle and listener are set up in OnStart, against the API server, and it stops after the
// controller), or the in-process proxy, which each leadership term's publisher owns.
func dataPlaneModule() fx.Option {
	return fx.Module("data-plane", fx.Provide(newDataPlane))
}

// dataPlane is the controller's side of the data plane.
type dataPlane struct {
	// trustBundle is the discovery CA bundle once started, for the dedicated mode.
	trustBundle trustBundle
	inProcess   controller.NewPublisher // nil unless --in-process-proxy
	discovery   *discovery.Server       // nil with an in-process proxy, and until started
	addr        net.Addr
	// sessionKey is --session-key-file's, else (once started) derived from the discovery CA;
	// nil with an in-process proxy and no file, and the controller makes a random one.
	sessionKey []byte
}

// SessionKey is the controller's Options.SessionKey; it is called once the data plane started.
func (dp *dataPlane) SessionKey() []byte { return dp.sessionKey }

// NewPublisher is the controller's seam to the data plane; the controller calls it once it
// leads, which is after the data plane started.
func (dp *dataPlane) NewPublisher(ctx context.Context, report controller.Reporter) (controller.Publisher, error) {
	if dp.inProcess != nil {
		return dp.inProcess(ctx, report)
	}
	return dp.discovery.NewPublisher(ctx, report)
}

func newDataPlane(lc fx.Lifecycle, cc *controllerConfig, reg *core.Registry, log *zap.Logger, kc kubeClients,
	metrics *prometheus.Registry) (*dataPlane, error) {
	d := &cc.dataPlane
	if d.inProcess {
		obs := cc.proxy.Observe()
		al, closeLog, err := obs.OpenAccessLog(os.Stdout, metrics)
		if err != nil {
			return nil, err
		}
		lc.Append(fx.StopHook(closeLog))
		return &dataPlane{inProcess: inprocess.New(inprocess.Options{Log: log.Named("proxy"), Registry: reg, Limits: cc.proxy.Limits(),
			ModuleSettings: cc.proxy.Settings(), Metrics: metrics, RequestMetrics: obs.RequestMetrics, AccessLog: al}), sessionKey: cc.sessionKey}, nil
	}
	dp := &dataPlane{sessionKey: cc.sessionKey}
	lc.Append(fx.Hook{
		OnStart: func(ctx context.Context) error { return d.start(ctx, dp, log, kc, metrics) },
		OnStop: func(context.Context) error {
			dp.discovery.Stop()
			return nil
		},
	})
	return dp, nil
}

// start prepares the CA, the trust bundle and the discovery server, listening.
func (d *dataPlaneFlags) start(ctx context.Context, dp *dataPlane, log *zap.Logger, kc kubeClients, metrics prometheus.Registerer) error {
	ns := d.namespace
	if ns == "" {
		ns = controller.OwnNamespace()
	}
	var ca *discovery.CA
	var err error
	if d.caCertFile != "" || d.caKeyFile != "" {
		ca, err = discovery.LoadCAFiles(d.trustDomain, d.caCertFile, d.caKeyFile)
	} else {
		ca, err = discovery.EnsureCA(ctx, kc.kube, ns, d.caSecret, d.trustDomain)
	}
	if err != nil {
		return fmt.Errorf("discovery CA: %w", err)
	}
	if dp.sessionKey == nil {
		// Every replica loads this CA, so all of them (and every restart) key cookies alike.
		if dp.sessionKey, err = ca.DeriveSecret(sessionKeyLabel); err != nil {
			return fmt.Errorf("session persistence key from the discovery CA: %w", err)
		}
	}
	if err := discovery.PublishBundle(ctx, kc.kube, ns, d.bundleConfigMap, ca.Bundle()); err != nil {
		return fmt.Errorf("publishing the trust bundle: %w", err)
	}
	dp.trustBundle.set(ca.Bundle())
	shared := []string(d.sharedProxies)
	if len(shared) == 0 {
		shared = []string{ns + "/coxswain-proxy"}
	}
	names := []string(d.serverNames)
	if len(names) == 0 {
		names = []string{"coxswain-discovery." + ns + ".svc"}
	}
	srv, err := discovery.New(discovery.Options{
		Log: log.Named("discovery"), CA: ca, Authenticate: discovery.TokenReviewAuthenticator(kc.kube, svid.Audience),
		SVIDTTL: d.svidTTL, SharedProxies: shared, ServerNames: names, Metrics: metrics,
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", d.address)
	if err != nil {
		return fmt.Errorf("discovery endpoint (change it with --discovery-address): %w", err)
	}
	go func() {
		if err := srv.Serve(ln); err != nil {
			log.Error("discovery server stopped", zap.Error(err))
		}
	}()
	log.Info("discovery endpoint listening", zap.String("address", ln.Addr().String()), zap.String("trustDomain", d.trustDomain),
		zap.String("trustBundle", ns+"/"+d.bundleConfigMap), zap.Strings("sharedProxies", shared))
	dp.discovery, dp.addr = srv, ln.Addr()
	return nil
}

// controllerCollectors are the controller's series, added to the metrics registry through the
// collectors value group.
func controllerCollectors(ctrl *controller.Controller) []prometheus.Collector {
	st := ctrl.Stats()
	return []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "coxswain_controller_translations_total", Help: "Full translations."},
			func() float64 { return float64(st.Translations.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "coxswain_controller_endpoint_refreshes_total", Help: "Endpoints-only snapshot updates."},
			func() float64 { return float64(st.EndpointRefreshes.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "coxswain_controller_publishes_total", Help: "Snapshots published."},
			func() float64 { return float64(st.Publishes.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "coxswain_controller_publish_failures_total", Help: "Failed publishes."},
			func() float64 { return float64(st.PublishFailures.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "coxswain_controller_leading", Help: "1 while this replica leads."},
			func() float64 { return b2f(st.Leading.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "coxswain_controller_translate_seconds", Help: "Duration of the latest translation."},
			func() float64 { return time.Duration(st.TranslateNanos.Load()).Seconds() }),
		st.UnresolvedFilters, st.TranslateDuration, st.ChangeLag,
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "coxswain_controller_status_writes_total",
			Help: "Status updates written to the API server (Gateways, GatewayClasses, routes, policies, ListenerSets)."},
			func() float64 { return float64(status.APICounters.Writes.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "coxswain_controller_status_conflicts_total",
			Help: "Status updates the API server refused with a conflict (then retried from a fresh read)."},
			func() float64 { return float64(status.APICounters.Conflicts.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "coxswain_controller_status_failures_total",
			Help: "Status updates that failed for another reason than a conflict."},
			func() float64 { return float64(status.APICounters.Failures.Load()) }),
	}
}

// serveControllerAdmin serves the controller's admin endpoints (docs/admin-api.md): the common
// ones, the fleet, routing and problems from the latest translation, Events, and proxy pod logs,
// with /api/v1 behind --admin-auth.
func serveControllerAdmin(lc fx.Lifecycle, cc *controllerConfig, as *proxycmd.AdminServer, ctrl *controller.Controller, dp *dataPlane,
	metrics *prometheus.Registry, kc kubeClients, log *zap.Logger) {
	if cc.healthAddress == "" {
		return
	}
	st := ctrl.Stats()
	v, _ := proxycmd.BuildVersion()
	events := adminapi.NewEvents(kc.kube, eventGroups, cc.controllerName)
	ctx, stop := context.WithCancel(context.Background())
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error { go events.Run(ctx); return nil },
		OnStop:  func(context.Context) error { stop(); return nil },
	})
	auth := adminapi.ResolveAuth(cc.adminAuth, cc.healthAddress)
	var authz *adminapi.Authorizer
	if auth == adminapi.AuthKubernetes {
		authz = adminapi.NewAuthorizer(kc.kube)
	} else {
		log.Warn("the admin API runs without authentication (--admin-auth); pod logs are not served",
			zap.String("address", cc.healthAddress))
	}
	// The mux is made at start, after the data plane's, whose fleet endpoints it mounts.
	as.Serve(lc, cc.healthAddress, func() http.Handler {
		mux := admin.NewMux(admin.Options{Component: "controller", Version: v, Gatherer: metrics, Leader: st.Leading.Load,
			Identity: ctrl.Identity(), LeaderIdentity: ctrl.LeaderIdentity,
			Subsystems: func() []admin.Subsystem { return dp.subsystems(ctrl, events) }})
		if dp.discovery != nil {
			dp.discovery.RegisterAdmin(mux)
		}
		adminapi.RegisterTranslation(mux, ctrl.Latest(), "this replica has not translated yet: it is not the leader, or its caches are still syncing (see /api/v1/health)")
		events.Register(mux)
		adminapi.RegisterManifests(mux, ctrl.Latest(), ctrl)
		(&adminapi.PodLogs{Kube: kc.kube, Auth: authz}).Register(mux)
		// The page holds no data; what it shows comes from /api/v1, which authz guards.
		console.Register(mux)
		if cc.adminPprof {
			adminapi.RegisterProfiling(mux)
		}
		if authz != nil {
			return authz.Wrap(mux)
		}
		return mux
	}, "change it with --admin-address")
	lc.Append(fx.StartHook(func() {
		if a := as.Addr(); a != nil {
			log.Info("operator console", zap.String("url", console.URL(a)))
		}
	}))
}

// eventGroups are the API groups whose objects' Events /api/v1/events shows.
var eventGroups = []string{gwapiv1.GroupName, policyv1a1.GroupName}

func (dp *dataPlane) subsystems(ctrl *controller.Controller, events *adminapi.Events) []admin.Subsystem {
	subs := []admin.Subsystem{{Name: "informers", Ready: ctrl.Synced()}, {Name: "events", Ready: true, Detail: map[string]any{"synced": events.HasSynced()}}}
	if dp.discovery == nil {
		return append(subs, admin.Subsystem{Name: "in-process proxy", Ready: true})
	}
	f := dp.discovery.Fleet()
	return append(subs, admin.Subsystem{Name: "discovery", Ready: true, Detail: map[string]any{
		"address": dp.addr.String(), "leading": f.Leader, "proxies": len(f.Proxies)}})
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
