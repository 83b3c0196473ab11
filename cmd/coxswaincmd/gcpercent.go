package coxswaincmd

import (
	"flag"
	"os"
	"runtime/debug"

	"go.uber.org/zap"
)

// gcPercent is the controller's --gc-percent: GOGC for a process whose heap is mostly long-lived
// caches and translation state, where the collector's headroom (GOGC=100: the heap grows to twice
// what was live before the next collection, and the runtime keeps about that resident) is most
// of the resident set that is not the binary (docs/controller.md, "Controller memory").
type gcPercent struct{ percent int }

func (g *gcPercent) register(fs *flag.FlagSet) {
	fs.IntVar(&g.percent, "gc-percent", 0,
		"GOGC of the controller: the heap may grow by this percentage of what was live at the last collection before the next; lower trades CPU for memory; 0 keeps the runtime's (a GOGC environment variable, else 100); a GOGC environment variable wins")
}

// apply sets GOGC unless the environment sets it or the flag is 0.
func (g *gcPercent) apply(log *zap.Logger) {
	if env := os.Getenv("GOGC"); env != "" {
		log.Info("GOGC from the environment", zap.String("GOGC", env))
		return
	}
	if g.percent <= 0 {
		return
	}
	debug.SetGCPercent(g.percent)
	log.Info("GOGC set", zap.Int("percent", g.percent))
}
