package proxycmd

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/samber/lo"
	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/core/admin"
	"github.com/coxswain-labs/coxswain/core/proxy"
	"github.com/coxswain-labs/coxswain/core/proxy/agent"
)

// proxyConfig is the parsed command line of `coxswain proxy`. It holds no Kubernetes
// credentials: what it needs is the discovery address, a projected ServiceAccount token and the
// trust bundle.
type proxyConfig struct {
	discovery     StringList
	tokenFile     string
	trustBundle   string
	gateway       string
	node          string
	listenAddress string
	adminAddress  string
	drain         time.Duration
	log           LogFlags
	limits        ProxyFlags
	memory        MemoryFlags
}

func (p *proxyConfig) register(fs *flag.FlagSet) {
	fs.Var(&p.discovery, "discovery-address",
		"host:port of the controllers' discovery endpoint (repeatable or comma-separated; a name resolving to several addresses stands for all)")
	fs.StringVar(&p.tokenFile, "token-file", "/var/run/secrets/coxswain/discovery-token/token",
		`projected ServiceAccount token with audience "coxswain-discovery", exchanged for an SVID`)
	fs.StringVar(&p.trustBundle, "trust-bundle", "/var/run/secrets/coxswain/trust-bundle/ca.crt",
		"PEM CA certificates the controller's certificate must chain to (the trust-bundle ConfigMap)")
	fs.StringVar(&p.gateway, "gateway", "", "namespace/name of the one Gateway a dedicated proxy serves; empty: a shared proxy serving every Gateway")
	fs.StringVar(&p.node, "node-name", "", "this proxy's unique name in the fleet; $POD_NAME, else the hostname, when empty")
	fs.StringVar(&p.listenAddress, "listen-address", "", "bind listeners that name no address to this IP; every local address when empty")
	fs.StringVar(&p.adminAddress, "admin-address", ":9901", "address of /healthz, /readyz, /metrics and /api/v1/health; empty disables them")
	fs.DurationVar(&p.drain, "shutdown-timeout", 15*time.Second, "how long in-flight requests may finish on shutdown")
	p.log.Register(fs)
	p.limits.Register(fs)
	p.memory.Register(fs)
}

// RunProxy runs `coxswain proxy` until SIGINT or SIGTERM.
func RunProxy(args []string, e *Env) int {
	fs := NewFlagSet("proxy", "--discovery-address HOST:PORT [flags]", e)
	var pc proxyConfig
	pc.register(fs)
	if code, ok := Parse(fs, args); !ok {
		return code
	}
	if len(pc.discovery) == 0 {
		fmt.Fprintln(e.Stderr, "coxswain proxy: --discovery-address is required")
		fs.Usage()
		return 2
	}
	if pc.node == "" {
		pc.node = os.Getenv("POD_NAME")
	}
	if pc.node == "" {
		pc.node, _ = os.Hostname()
	}
	log, err := NewLogger(pc.log.Format, pc.log.Level, e.Stderr)
	if err != nil {
		fmt.Fprintf(e.Stderr, "coxswain proxy: %v\n", err)
		return 2
	}
	if err := pc.memory.SetLimit(log); err != nil {
		fmt.Fprintf(e.Stderr, "coxswain proxy: %v\n", err)
		return 2
	}
	var appLog *zap.Logger
	app := fx.New(
		ConfigModule(e, pc.log, EngineConfig{Limits: pc.limits.Limits(), Settings: pc.limits.Settings(), Memory: &pc.memory, Drain: pc.drain,
			Observe: new(pc.limits.Observe()), Stdout: e.Stdout},
			fx.Supply(&pc)),
		LoggerModule(e.Stderr),
		MetricsModule(),
		AdminModule(),
		EngineModule(),
		fx.Module("discovery-agent", fx.Provide(newAgent), fx.Invoke(runAgent)),
		fx.Invoke(serveProxyAdmin),
		fx.Populate(&appLog),
		StopTimeout(pc.drain),
	)
	return RunApp(app, &appLog, "coxswain proxy", e.Stderr)
}

// ConfigModule is a command's configuration: the parsed flags, the frozen module registry, and
// the engine's settings, supplied as values. extra supplies the command's own flag struct.
func ConfigModule(e *Env, lf LogFlags, ec EngineConfig, extra ...fx.Option) fx.Option {
	return fx.Module("config", append([]fx.Option{fx.Supply(e.Reg, lf, ec)}, extra...)...)
}

// StopTimeout gives the stop hooks the drain bound plus time for what stops before the engine.
func StopTimeout(drain time.Duration) fx.Option {
	return fx.StopTimeout(drain + 10*time.Second)
}

func newAgent(pc *proxyConfig, log *zap.Logger, reg *core.Registry, eng agent.Engine, metrics *prometheus.Registry) (*agent.Agent, error) {
	mods := lo.Map(reg.IDs(), func(id core.ModuleID, _ int) string { return string(id) })
	v, _ := BuildVersion()
	log.Info("coxswain proxy starting", zap.String("node", pc.node), zap.Strings("discovery", pc.discovery),
		zap.String("gateway", pc.gateway), zap.Int("modules", len(mods)))
	return agent.New(agent.Options{
		Log: log.Named("discovery"), Engine: eng, Modules: mods, Addresses: pc.discovery,
		TokenFile: pc.tokenFile, TrustBundleFile: pc.trustBundle, Node: pc.node, Gateway: pc.gateway,
		ListenAddress: pc.listenAddress, Build: v, Metrics: metrics,
	})
}

func runAgent(lc fx.Lifecycle, sd fx.Shutdowner, log *zap.Logger, ag *agent.Agent) {
	Background(lc, sd, log, "discovery agent", ag.Run)
}

func serveProxyAdmin(lc fx.Lifecycle, pc *proxyConfig, as *AdminServer, ag *agent.Agent, px *proxy.Proxy, metrics *prometheus.Registry) {
	if pc.adminAddress == "" {
		return
	}
	v, _ := BuildVersion()
	as.Serve(lc, pc.adminAddress, func() http.Handler {
		return admin.NewMux(admin.Options{Component: "proxy", Version: v, Gatherer: metrics, Subsystems: func() []admin.Subsystem {
			return []admin.Subsystem{
				{Name: "snapshot", Ready: ag.Ready(), Detail: map[string]any{"version": px.Version(), "listeners": px.Bound()}},
				// Disconnected is not unready: the proxy serves its last snapshot meanwhile.
				{Name: "discovery", Ready: true, Detail: ag.Status()},
			}
		}})
	}, "change it with --admin-address")
}

// AdminServer is a process's admin endpoint (core/admin). AdminModule is listed before the
// components the endpoint reports on, so the server is closed after them: /healthz and /metrics
// keep answering while the proxy drains, as they did before the processes were wired with fx. It
// starts listening from Serve, once those components exist.
type AdminServer struct {
	log *zap.Logger
	srv *admin.Server
}

// AdminModule provides the AdminServer and takes its place in the stop order.
func AdminModule() fx.Option {
	return fx.Module("admin", fx.Provide(newAdminServer), fx.Invoke(func(*AdminServer) {}))
}

func newAdminServer(lc fx.Lifecycle, log *zap.Logger) *AdminServer {
	a := &AdminServer{log: log}
	lc.Append(fx.StopHook(func() error {
		if a.srv == nil {
			return nil
		}
		return a.srv.Close()
	}))
	return a
}

// Serve appends the OnStart hook that serves the handler h makes on addr; a port that cannot be
// bound fails the start, with hint in the error. Call it from an fx.Invoke at the application's
// root (root invokes run after the modules'), so h runs after the hooks of what it reports on.
func (a *AdminServer) Serve(lc fx.Lifecycle, addr string, h func() http.Handler, hint string) {
	lc.Append(fx.StartHook(func() error {
		srv, err := admin.Serve(addr, h(), a.log)
		if err != nil {
			return fmt.Errorf("admin endpoint (%s): %w", hint, err)
		}
		a.srv = srv
		return nil
	}))
}

// Addr is the address the admin server listens on; nil before it has started.
func (a *AdminServer) Addr() net.Addr {
	if a.srv == nil {
		return nil
	}
	return a.srv.Addr()
}
