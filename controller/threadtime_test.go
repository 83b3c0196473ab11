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
	for time.Since(start) < 100*time.Millisecond {
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
	// The kernel's accounting and the monotonic clock may differ by up to a scheduler tick at
	// each reading: schedstat's runtime of a running thread is brought up to date at ticks and
	// switches only (a run under -race once read 0.8 ms over a 1 ms allowance; at HZ=250 a
	// tick is 4 ms).
	const ticks = 8 * time.Millisecond
	if cpu+queued+goWait > wall+ticks {
		t.Fatalf("CPU %s + run queue %s + Go wait %s exceed the wall time %s", cpu, queued, goWait, wall)
	}
	// A busy loop never blocks: its thread was running or runnable nearly all the time (read
	// from another thread, the split would say otherwise).
	if cpu+queued < wall/2 {
		t.Fatalf("CPU %s + run queue %s are under half the wall time %s of a busy loop", cpu, queued, wall)
	}
}
