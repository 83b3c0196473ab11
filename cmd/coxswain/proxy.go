package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/coxswain-labs/coxswain/core/admin"
	"github.com/coxswain-labs/coxswain/core/proxy"
	"github.com/coxswain-labs/coxswain/core/proxy/agent"
)

// proxyCmdFlags are the flags of `coxswain proxy`. It holds no Kubernetes credentials: what it
// needs is the discovery address, a projected ServiceAccount token and the trust bundle.
type proxyCmdFlags struct {
	discovery     stringList
	tokenFile     string
	trustBundle   string
	gateway       string
	node          string
	listenAddress string
	adminAddress  string
	drain         time.Duration
}

func (p *proxyCmdFlags) register(fs *flag.FlagSet) {
	fs.Var(&p.discovery, "discovery-address",
		"host:port of the controllers' discovery endpoint (repeatable or comma-separated; a name resolving to several addresses stands for all)")
	fs.StringVar(&p.tokenFile, "token-file", "/var/run/secrets/coxswain/token",
		`projected ServiceAccount token with audience "coxswain-discovery", exchanged for an SVID`)
	fs.StringVar(&p.trustBundle, "trust-bundle", "/etc/coxswain/trust-bundle/ca.crt",
		"PEM CA certificates the controller's certificate must chain to (the trust-bundle ConfigMap)")
	fs.StringVar(&p.gateway, "gateway", "", "namespace/name of the one Gateway a dedicated proxy serves; empty: a shared proxy serving every Gateway")
	fs.StringVar(&p.node, "node-name", "", "this proxy's unique name in the fleet; $POD_NAME, else the hostname, when empty")
	fs.StringVar(&p.listenAddress, "listen-address", "", "bind listeners that name no address to this IP; every local address when empty")
	fs.StringVar(&p.adminAddress, "admin-address", ":9901", "address of /healthz, /readyz, /metrics and /api/v1/health; empty disables them")
	fs.DurationVar(&p.drain, "shutdown-timeout", 15*time.Second, "how long in-flight requests may finish on shutdown")
}

// runProxy runs `coxswain proxy` until SIGINT or SIGTERM.
func runProxy(args []string, e *env) int {
	fs := newFlagSet("proxy", "--discovery-address HOST:PORT [flags]", e)
	var pf proxyCmdFlags
	var lf logFlags
	var lim proxyFlags
	var mf memoryFlags
	pf.register(fs)
	lf.register(fs)
	lim.register(fs)
	mf.register(fs)
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if len(pf.discovery) == 0 {
		fmt.Fprintln(e.stderr, "coxswain proxy: --discovery-address is required")
		fs.Usage()
		return 2
	}
	if pf.node == "" {
		pf.node = os.Getenv("POD_NAME")
	}
	if pf.node == "" {
		pf.node, _ = os.Hostname()
	}
	log, err := newLogger(lf.format, lf.level, e.stderr)
	if err != nil {
		fmt.Fprintf(e.stderr, "coxswain proxy: %v\n", err)
		return 2
	}
	defer func() { _ = log.Sync() }()
	if err := mf.setLimit(log); err != nil {
		fmt.Fprintf(e.stderr, "coxswain proxy: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := pf.run(ctx, log, e, lim.limits(), &mf); err != nil {
		log.Error("coxswain proxy failed", zap.Error(err))
		return 1
	}
	return 0
}

func (pf *proxyCmdFlags) run(ctx context.Context, log *zap.Logger, e *env, limits proxy.Limits, mf *memoryFlags) error {
	reg := admin.NewRegistry()
	px := proxy.New(proxy.Options{Log: log.Named("proxy"), Registry: e.reg, Limits: limits})
	var engine agent.Engine = px
	if lean, ok := mf.engine(px); ok {
		engine = lean
	}
	var mods []string
	for _, id := range e.reg.IDs() {
		mods = append(mods, string(id))
	}
	v, _ := buildVersion()
	ag, err := agent.New(agent.Options{
		Log: log.Named("discovery"), Engine: engine, Modules: mods, Addresses: pf.discovery,
		TokenFile: pf.tokenFile, TrustBundleFile: pf.trustBundle, Node: pf.node, Gateway: pf.gateway,
		ListenAddress: pf.listenAddress, Build: v, Metrics: reg,
	})
	if err != nil {
		return err
	}
	if pf.adminAddress != "" {
		mux := admin.NewMux(admin.Options{Component: "proxy", Version: v, Gatherer: reg, Subsystems: func() []admin.Subsystem {
			return []admin.Subsystem{
				{Name: "snapshot", Ready: ag.Ready(), Detail: map[string]any{"version": px.Version(), "listeners": px.Bound()}},
				// Disconnected is not unready: the proxy serves its last snapshot meanwhile.
				{Name: "discovery", Ready: true, Detail: ag.Status()},
			}
		}})
		srv, err := admin.Serve(pf.adminAddress, mux, log)
		if err != nil {
			return fmt.Errorf("admin endpoint (change it with --admin-address): %w", err)
		}
		defer func() { _ = srv.Close() }()
	}
	log.Info("coxswain proxy starting", zap.String("node", pf.node), zap.Strings("discovery", pf.discovery),
		zap.String("gateway", pf.gateway), zap.Int("modules", len(mods)))
	runErr := ag.Run(ctx)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), pf.drain)
	defer cancel()
	closeErr := px.Close(shutdownCtx)
	if errors.Is(closeErr, context.DeadlineExceeded) {
		closeErr = nil // connections still open after the drain were closed: that is the drain
	}
	return errors.Join(runErr, closeErr)
}
