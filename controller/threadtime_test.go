package controller

import (
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
)

// TestWallSplit: a stretch of busy work is split into its CPU time, its run-queue wait and
// the rest, which add up to its wall time.
func TestWallSplit(t *testing.T) {
	if _, _, ok := threadSchedstat(); !ok {
		t.Skip("no /proc/thread-self/schedstat")
	}
	start := time.Now()
	w := startWallSplit()
	x := 0
	for time.Since(start) < 30*time.Millisecond {
		x++
	}
	fields := w.finish()
	wall := time.Since(start)
	got := map[string]time.Duration{}
	for _, f := range fields {
		if f.Type == zapcore.DurationType {
			got[f.Key] = time.Duration(f.Integer)
		}
	}
	cpu, queued, goWait := got["translatedCPU"], got["translatedRunQueue"], got["translatedGoWait"]
	if len(fields) != 4 || cpu <= 0 {
		t.Fatalf("fields %v (busy loop of %d)", fields, x)
	}
	// The kernel's accounting and the monotonic clock may differ by a scheduler tick's rounding.
	if cpu+queued+goWait > wall+time.Millisecond {
		t.Fatalf("CPU %s + run queue %s + Go wait %s exceed the wall time %s", cpu, queued, goWait, wall)
	}
	// A busy loop never blocks: its thread was running or runnable nearly all the time (read
	// from another thread, the split would say otherwise).
	if cpu+queued < wall/2 {
		t.Fatalf("CPU %s + run queue %s are under half the wall time %s of a busy loop", cpu, queued, wall)
	}
}
