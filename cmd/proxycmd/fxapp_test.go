package proxycmd

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.uber.org/fx"
	"go.uber.org/zap"
)

// recorder records the order components start and stop in.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(e string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// first is a component the second one depends on.
type first struct{}

// component appends hooks named name; run is its blocking body.
func component(r *recorder, name string, run func(context.Context) error) func(fx.Lifecycle, fx.Shutdowner, *zap.Logger) {
	return func(lc fx.Lifecycle, sd fx.Shutdowner, log *zap.Logger) {
		lc.Append(fx.Hook{
			OnStart: func(context.Context) error { r.add("start " + name); return nil },
			OnStop:  func(context.Context) error { r.add("stop " + name); return nil },
		})
		Background(lc, sd, log, name, run)
	}
}

// TestRunApp: components stop in the reverse of their start order, and one that fails ends the
// process with exit code 1 and its error logged.
func TestRunApp(t *testing.T) {
	var r recorder
	var out bytes.Buffer
	blocked := func(ctx context.Context) error { <-ctx.Done(); return nil }
	failing := func(context.Context) error { return errors.New("boom") }
	var log *zap.Logger
	app := fx.New(
		ConfigModule(&Env{}, LogFlags{Format: "json", Level: "info"}, EngineConfig{}),
		LoggerModule(&out),
		fx.Provide(func(lc fx.Lifecycle, sd fx.Shutdowner, log *zap.Logger) first {
			component(&r, "first", blocked)(lc, sd, log)
			return first{}
		}),
		// second depends on first, so it starts after it and stops before it.
		fx.Invoke(func(_ first, lc fx.Lifecycle, sd fx.Shutdowner, log *zap.Logger) {
			component(&r, "second", failing)(lc, sd, log)
		}),
		fx.Populate(&log),
	)
	if code := RunApp(app, &log, "test", &out); code != 1 {
		t.Fatalf("exit code %d, want 1; log:\n%s", code, out.String())
	}
	want := []string{"start first", "start second", "stop second", "stop first"}
	if !slices.Equal(r.events, want) {
		t.Errorf("events %v, want %v", r.events, want)
	}
	if !strings.Contains(out.String(), `"msg":"second failed","error":"boom"`) {
		t.Errorf("the failure is not logged:\n%s", out.String())
	}
}

// TestRunAppStartFailure: a component that cannot start (a port taken) fails the process with
// exit code 1, its error logged under the command's name, and what had started is stopped.
func TestRunAppStartFailure(t *testing.T) {
	var r recorder
	var out bytes.Buffer
	var log *zap.Logger
	app := fx.New(
		ConfigModule(&Env{}, LogFlags{Format: "json", Level: "info"}, EngineConfig{}),
		LoggerModule(&out),
		fx.Invoke(func(lc fx.Lifecycle) {
			lc.Append(fx.Hook{OnStart: func(context.Context) error { r.add("start ok"); return nil },
				OnStop: func(context.Context) error { r.add("stop ok"); return nil }})
			lc.Append(fx.StartHook(func() error { return errors.New("port taken") }))
		}),
		fx.Populate(&log),
	)
	if code := RunApp(app, &log, "coxswain test", &out); code != 1 {
		t.Fatalf("exit code %d, want 1", code)
	}
	if !slices.Equal(r.events, []string{"start ok", "stop ok"}) {
		t.Errorf("events %v", r.events)
	}
	if !strings.Contains(out.String(), `"msg":"coxswain test failed"`) || !strings.Contains(out.String(), "port taken") {
		t.Errorf("the failure is not logged:\n%s", out.String())
	}
}
