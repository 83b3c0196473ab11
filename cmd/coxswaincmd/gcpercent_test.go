package coxswaincmd

import (
	"flag"
	"runtime/debug"
	"testing"

	"go.uber.org/zap"
)

// TestGCPercentFlag: --gc-percent sets GOGC, 0 leaves it, and a GOGC environment variable wins.
func TestGCPercentFlag(t *testing.T) {
	orig := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(orig) })
	for _, c := range []struct {
		name, env string
		args      []string
		want      int
	}{
		{"flag", "", []string{"--gc-percent", "50"}, 50},
		{"default", "", nil, 100},
		{"environment wins", "200", []string{"--gc-percent", "50"}, 100},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("GOGC", c.env)
			debug.SetGCPercent(100)
			fs := flag.NewFlagSet("controller", flag.ContinueOnError)
			var g gcPercent
			g.register(fs)
			if err := fs.Parse(c.args); err != nil {
				t.Fatal(err)
			}
			g.apply(zap.NewNop())
			if got := debug.SetGCPercent(100); got != c.want {
				t.Fatalf("GOGC %d, want %d", got, c.want)
			}
		})
	}
}
