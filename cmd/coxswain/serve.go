package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/coxswain-labs/coxswain/controller/standalone"
	"github.com/coxswain-labs/coxswain/core/proxy"
)

// serve runs standalone mode until SIGINT or SIGTERM.
func serve(args []string, e *env) int {
	fs := newFlagSet("serve", "-f PATH [flags]", e)
	var cf configFlags
	var lf logFlags
	var pf proxyFlags
	var mf memoryFlags
	cf.register(fs)
	lf.register(fs)
	pf.register(fs)
	mf.register(fs)
	admin := fs.String("admin-address", "127.0.0.1:9901",
		"address of the admin endpoints /healthz, /readyz and /status; empty disables them")
	debounce := fs.Duration("debounce", standalone.DefaultDebounce, "how long file changes must settle before a reload")
	drain := fs.Duration("shutdown-timeout", 15*time.Second, "how long in-flight requests may finish on shutdown")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if !cf.check(fs) {
		return 2
	}
	log, err := newLogger(lf.format, lf.level, e.stderr)
	if err != nil {
		fmt.Fprintf(e.stderr, "coxswain serve: %v\n", err)
		return 2
	}
	defer func() { _ = log.Sync() }()
	if err := mf.setLimit(log); err != nil {
		fmt.Fprintf(e.stderr, "coxswain serve: %v\n", err)
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := runServe(ctx, log, e, cf, pf.limits(), &mf, *admin, *debounce, *drain); err != nil {
		log.Error("coxswain serve failed", zap.Error(err))
		return 1
	}
	return 0
}

// runServe wires the proxy, the runner and the admin server, and tears them down in reverse.
func runServe(ctx context.Context, log *zap.Logger, e *env, cf configFlags, limits proxy.Limits, mf *memoryFlags, adminAddr string, debounce, drain time.Duration) error {
	px := proxy.New(proxy.Options{Log: log.Named("proxy"), Registry: e.reg, Limits: limits})
	var engine standalone.Engine = px
	if lean, ok := mf.engine(px); ok {
		engine = lean
	}
	opts := cf.translateOptions()
	opts.Registry = e.reg
	runner := standalone.NewRunner(standalone.Options{
		Path: cf.path, Log: log.Named("standalone"), Engine: engine, Translate: opts, Debounce: debounce,
	})

	var adminSrv *http.Server
	if adminAddr != "" {
		ln, err := net.Listen("tcp", adminAddr)
		if err != nil {
			return fmt.Errorf("admin endpoint (change it with --admin-address, or disable it with --admin-address=''): %w", err)
		}
		adminSrv = &http.Server{Handler: standalone.AdminHandler(runner), ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := adminSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("admin server stopped", zap.Error(err))
			}
		}()
		log.Info("admin endpoints listening", zap.String("address", ln.Addr().String()),
			zap.Strings("paths", []string{"/healthz", "/readyz", "/status"}))
	}

	log.Info("coxswain serve starting", zap.String("path", cf.path), zap.String("controllerName", cf.controllerName))
	runErr := runner.Run(ctx)

	shutdownCtx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	if adminSrv != nil {
		_ = adminSrv.Shutdown(shutdownCtx)
	}
	closeErr := px.Close(shutdownCtx)
	if runErr == nil {
		log.Info("coxswain serve stopped")
	}
	return errors.Join(runErr, closeErr)
}
