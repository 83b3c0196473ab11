package coxswaincmd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/coxswain-labs/coxswain/cmd/proxycmd"
	"github.com/coxswain-labs/coxswain/controller/console"
	"github.com/coxswain-labs/coxswain/controller/documents"
	"github.com/coxswain-labs/coxswain/controller/standalone"
	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/core/proxy/agent"
)

// serveConfig is the parsed command line of `coxswain serve`.
type serveConfig struct {
	config    configFlags
	log       proxycmd.LogFlags
	limits    proxycmd.ProxyFlags
	memory    proxycmd.MemoryFlags
	adminAddr string
	debounce  time.Duration
	drain     time.Duration
	session   sessionKeyFlag
	ingress   ingressFlags
	acme      acmeFlags

	sessionKey []byte // read from --session-key-file, else random
}

// serve runs standalone mode until SIGINT or SIGTERM: on either, the proxy stops accepting at
// once and in-flight requests get --shutdown-timeout to finish, then it exits 0.
func serve(args []string, e *proxycmd.Env) int {
	fs := proxycmd.NewFlagSet("serve", "-f PATH [flags]", e)
	var sc serveConfig
	sc.config.register(fs)
	sc.log.Register(fs)
	sc.limits.Register(fs)
	sc.memory.Register(fs)
	fs.StringVar(&sc.adminAddr, "admin-address", "127.0.0.1:9901",
		"address of the operator console (/) and the admin endpoints /healthz, /readyz, /status, /metrics and /api/v1 (docs/admin-api.md); empty disables them")
	fs.DurationVar(&sc.debounce, "debounce", standalone.DefaultDebounce, "how long file changes must settle before a reload")
	fs.DurationVar(&sc.drain, "shutdown-timeout", 15*time.Second, "how long in-flight requests may finish on shutdown")
	sc.session.register(fs, "without it a random key per process, so cookies do not survive a restart")
	sc.ingress.register(fs)
	sc.acme.register(fs)
	if code, ok := proxycmd.Parse(fs, args); !ok {
		return code
	}
	if !sc.config.check(fs) {
		return 2
	}
	if err := sc.ingress.check(); err != nil {
		fmt.Fprintf(e.Stderr, "coxswain serve: %v\n", err)
		return 2
	}
	var err error
	if sc.sessionKey, err = sc.session.key(); err != nil {
		fmt.Fprintf(e.Stderr, "coxswain serve: %v\n", err)
		return 2
	}
	if sc.sessionKey == nil {
		sc.sessionKey = randomSessionKey()
	}
	log, err := proxycmd.NewLogger(sc.log.Format, sc.log.Level, e.Stderr)
	if err != nil {
		fmt.Fprintf(e.Stderr, "coxswain serve: %v\n", err)
		return 2
	}
	if err := sc.memory.SetLimit(log); err != nil {
		fmt.Fprintf(e.Stderr, "coxswain serve: %v\n", err)
		return 2
	}
	var appLog *zap.Logger
	app := fx.New(
		proxycmd.ConfigModule(e, sc.log,
			proxycmd.EngineConfig{Limits: sc.limits.Limits(), Settings: sc.limits.Settings(), Memory: &sc.memory, Drain: sc.drain,
				Observe: new(sc.limits.Observe()), Stdout: e.Stdout}, fx.Supply(&sc)),
		proxycmd.LoggerModule(e.Stderr),
		proxycmd.MetricsModule(),
		proxycmd.EngineModule(),
		fx.Module("standalone", fx.Provide(newRunner), fx.Invoke(runRunner)),
		fx.Module("admin", fx.Supply(e), fx.Invoke(serveStandaloneAdmin)),
		fx.Populate(&appLog),
		proxycmd.StopTimeout(sc.drain),
	)
	return proxycmd.RunApp(app, &appLog, "coxswain serve", e.Stderr)
}

// newRunner is the standalone runner: the Store, the translator and the file watcher, applying
// to the proxy engine.
func newRunner(sc *serveConfig, reg *core.Registry, log *zap.Logger, eng agent.Engine, metrics *prometheus.Registry) (*standalone.Runner, error) {
	opts := sc.config.translateOptions()
	opts.Registry = reg
	opts.SessionKey = sc.sessionKey
	opts.KindSettings = sc.ingress.settings()
	unresolved := standalone.NewUnresolvedFiltersCounter()
	if err := metrics.Register(unresolved); err != nil {
		return nil, err
	}
	return standalone.NewRunner(standalone.Options{
		Path: sc.config.path, Log: log.Named("standalone"), Engine: eng, Translate: opts, Debounce: sc.debounce,
		Documents: &documents.Options{}, UnresolvedFilters: unresolved, ACME: sc.acme.options(),
	}), nil
}

func runRunner(lc fx.Lifecycle, sd fx.Shutdowner, sc *serveConfig, log *zap.Logger, r *standalone.Runner) {
	lc.Append(fx.StartHook(func() {
		log.Info("coxswain serve starting", zap.String("path", sc.config.path), zap.String("controllerName", sc.config.controllerName))
	}))
	proxycmd.Background(lc, sd, log, "coxswain serve", r.Run)
}

// serveStandaloneAdmin serves the console at /, and /healthz, /readyz, /status and /metrics; it
// is stopped first, gracefully. The console's address goes to stdout, where a newcomer reads it
// among nothing else (the log is on stderr).
func serveStandaloneAdmin(lc fx.Lifecycle, sc *serveConfig, e *proxycmd.Env, log *zap.Logger, r *standalone.Runner, metrics *prometheus.Registry) {
	if sc.adminAddr == "" {
		return
	}
	mux := http.NewServeMux()
	console.Register(mux)
	v, _ := proxycmd.BuildVersion()
	mux.Handle("/", standalone.AdminHandler(r, v))
	mux.Handle("GET /metrics", promhttp.HandlerFor(metrics, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error {
			ln, err := net.Listen("tcp", sc.adminAddr)
			if err != nil {
				return fmt.Errorf("admin endpoint (change it with --admin-address, or disable it with --admin-address=''): %w", err)
			}
			go func() {
				if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
					log.Error("admin server stopped", zap.Error(err))
				}
			}()
			url := console.URL(ln.Addr())
			log.Info("admin endpoints listening", zap.String("address", ln.Addr().String()), zap.String("console", url),
				zap.Strings("paths", []string{"/", "/healthz", "/readyz", "/status", "/metrics", "/api/v1/health", "/api/v1/routing", "/api/v1/problems"}))
			fmt.Fprintf(e.Stdout, "Coxswain console: %s\n", url)
			return nil
		},
		OnStop: srv.Shutdown,
	})
}
