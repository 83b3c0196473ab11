package proxycmd

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/core/admin"
	"github.com/coxswain-labs/coxswain/core/proxy"
	"github.com/coxswain-labs/coxswain/core/proxy/agent"
)

// The processes are assembled with fx from one fx.Module per long-lived component. fx wires
// singletons only: the modules a snapshot names are built per snapshot by the proxy engine and
// never pass through fx. Every constructor the modules call (proxy.New, agent.New, admin.Serve,
// ...) works without fx, and tests use them directly.

// CollectorsGroup is the value group of extra Prometheus collectors: components add theirs, in no
// particular order, and the metrics module registers them all.
const CollectorsGroup = `group:"collectors"`

// LoggerModule is the process logger, made from the parsed LogFlags, writing to w. fx's own
// events go through it at debug level, so the default log says what Coxswain does, not how it was
// wired; fx's errors stay at error level.
func LoggerModule(w io.Writer) fx.Option {
	return fx.Options(
		fx.Module("logger", fx.Provide(func(lf LogFlags, lc fx.Lifecycle) (*zap.Logger, error) {
			log, err := NewLogger(lf.Format, lf.Level, w)
			if err != nil {
				return nil, err
			}
			lc.Append(fx.StopHook(func() { _ = log.Sync() }))
			return log, nil
		})),
		fx.WithLogger(func(log *zap.Logger) fxevent.Logger {
			l := &fxevent.ZapLogger{Logger: log.Named("fx")}
			l.UseLogLevel(zapcore.DebugLevel)
			return lifecycleEvents{l}
		}),
	)
}

// lifecycleEvents passes on fx's lifecycle events (hooks run, started, stopped) and every error,
// and drops the wiring events (each provide, supply and invoke, with a stack trace): those are
// dozens of lines per start that say how the graph was built, not what the process does.
type lifecycleEvents struct{ next fxevent.Logger }

func (l lifecycleEvents) LogEvent(ev fxevent.Event) {
	switch e := ev.(type) {
	case *fxevent.Provided:
		if e.Err == nil {
			return
		}
	case *fxevent.Supplied:
		if e.Err == nil {
			return
		}
	case *fxevent.Invoked:
		if e.Err == nil {
			return
		}
	case *fxevent.Run:
		if e.Err == nil {
			return
		}
	case *fxevent.Started:
		if e.Err != nil {
			return // RunApp logs it, under the command's name
		}
	case *fxevent.Invoking, *fxevent.BeforeRun, *fxevent.LoggerInitialized:
		return
	}
	l.next.LogEvent(ev)
}

// MetricsModule is the process's Prometheus registry (Go runtime and process collectors
// included), with every collector in CollectorsGroup registered on it.
func MetricsModule() fx.Option {
	return fx.Module("metrics",
		fx.Provide(admin.NewRegistry),
		fx.Invoke(fx.Annotate(func(reg *prometheus.Registry, cs []prometheus.Collector) error {
			for _, c := range cs {
				if err := reg.Register(c); err != nil {
					return err
				}
			}
			return nil
		}, fx.ParamTags(``, CollectorsGroup))),
	)
}

// EngineConfig is what the proxy engine is made from.
type EngineConfig struct {
	Limits proxy.Limits
	// Settings are the --module-setting flags, handed to every module (core.BuildContext.Settings).
	Settings map[string]string
	Memory   *MemoryFlags
	// Drain bounds how long in-flight requests may finish once the engine stops.
	Drain time.Duration
	// Observe are the request metrics and access log flags; nil: neither (tests).
	Observe *ObserveFlags
	// Stdout is where the access log goes without --access-log-file.
	Stdout io.Writer
}

// EngineModule is the proxy engine: it provides the *proxy.Proxy and the agent.Engine the
// discovery agent or the standalone runner drive (the proxy, tuned by the memory flags). It is
// stopped after whatever feeds it: on stop it stops accepting on every socket at once, and lets
// in-flight requests finish for at most EngineConfig.Drain.
func EngineModule() fx.Option {
	return fx.Module("proxy-engine", fx.Provide(newEngine))
}

// engineParams are newEngine's dependencies; the metrics registry is optional (a process without
// MetricsModule), and modules' series go nowhere without it.
type engineParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Config    EngineConfig
	Log       *zap.Logger
	Registry  *core.Registry
	Metrics   *prometheus.Registry `optional:"true"`
}

func newEngine(p engineParams) (*proxy.Proxy, agent.Engine, error) {
	lc, cfg, log := p.Lifecycle, p.Config, p.Log
	// The agent's delta rebuilds and the standalone loader's translations make new messages for
	// what changed and never edit one applied: SharedMessages holds.
	opts := proxy.Options{Log: log.Named("proxy"), Registry: p.Registry, Limits: cfg.Limits, ModuleSettings: cfg.Settings,
		SharedMessages: true}
	var reg prometheus.Registerer
	if p.Metrics != nil {
		opts.Metrics, reg = p.Metrics, p.Metrics
	}
	closeLog := func() {}
	if o := cfg.Observe; o != nil {
		opts.RequestMetrics = o.RequestMetrics && p.Metrics != nil
		var err error
		if opts.AccessLog, closeLog, err = o.OpenAccessLog(cfg.Stdout, reg); err != nil {
			return nil, nil, err
		}
	}
	px := proxy.New(opts)
	if p.Metrics != nil {
		if err := p.Metrics.Register(px.StatsCollector()); err != nil {
			closeLog()
			return nil, nil, err
		}
	}
	lc.Append(fx.StopHook(func() error {
		defer closeLog() // after the drain: the last requests' lines are written too
		ctx, cancel := context.WithTimeout(context.Background(), cfg.Drain)
		defer cancel()
		err := px.Close(ctx)
		if errors.Is(err, context.DeadlineExceeded) {
			err = nil // connections still open after the drain were closed: that is the drain
		}
		return err
	}))
	eng := agent.Engine(px)
	if cfg.Memory != nil {
		eng = cfg.Memory.Engine(px)
	}
	return px, eng, nil
}

// Background runs a component's blocking run(ctx) from its OnStart hook until OnStop, which
// cancels it and waits for it to return. A component that ends by itself ends the process: with
// exit code 1 and the error logged when it failed, 0 when it finished.
func Background(lc fx.Lifecycle, sd fx.Shutdowner, log *zap.Logger, name string, run func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error {
			go func() {
				defer close(done)
				err := run(ctx)
				switch {
				case ctx.Err() != nil: // stopping: OnStop asked for it
				case err != nil:
					log.Error(name+" failed", zap.Error(err))
					_ = sd.Shutdown(fx.ExitCode(1))
				default:
					_ = sd.Shutdown()
				}
			}()
			return nil
		},
		OnStop: func(stopCtx context.Context) error {
			cancel()
			select {
			case <-done:
				return nil
			case <-stopCtx.Done():
				return stopCtx.Err()
			}
		},
	})
}

// RunApp starts app, waits for SIGINT, SIGTERM or a component's end, stops the components in
// reverse dependency order and returns the exit code. A failure to start is logged by log (what
// the command's own logger is, once fx has built it; nil before) under what.
func RunApp(app *fx.App, log **zap.Logger, what string, stderr io.Writer) int {
	startCtx, cancel := context.WithTimeout(context.Background(), app.StartTimeout())
	defer cancel()
	if err := app.Start(startCtx); err != nil {
		logFailure(*log, what, err, stderr)
		stopCtx, cancel := context.WithTimeout(context.Background(), app.StopTimeout())
		defer cancel()
		_ = app.Stop(stopCtx)
		return 1
	}
	sig := <-app.Wait()
	stopCtx, cancelStop := context.WithTimeout(context.Background(), app.StopTimeout())
	defer cancelStop()
	if err := app.Stop(stopCtx); err != nil {
		logFailure(*log, what, err, stderr)
		return 1
	}
	if sig.ExitCode == 0 {
		(*log).Info(what + " stopped")
	}
	return sig.ExitCode
}

func logFailure(log *zap.Logger, what string, err error, stderr io.Writer) {
	if log == nil {
		_, _ = io.WriteString(stderr, what+" failed: "+err.Error()+"\n")
		return
	}
	log.Error(what+" failed", zap.Error(err))
}
