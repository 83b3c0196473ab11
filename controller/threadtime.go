package controller

import (
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
)

// Where a translation's wall time goes. On a loaded machine a translation of 20,000 routes took
// ~100 ms of wall time end to end for a few tens of ms of CPU (docs/controller.md): the rest is
// the goroutine waiting, either for a CPU (the kernel's run queue: the machine's load) or for
// the Go scheduler (its thread parked while a collection's stop-the-world or another goroutine
// had the processor). The translation runs on one goroutine, so while it is pinned to its
// thread the kernel's per-thread scheduler statistics (/proc/thread-self/schedstat: time on a
// CPU, time runnable but waiting for one) split its wall time into those parts; the rest of the
// wall time is the Go-level wait. Collections that ended meanwhile are counted too: their mark
// assists run on this goroutine and count as its CPU.

// wallSplit measures one stretch of work on the calling goroutine.
type wallSplit struct {
	start           time.Time
	onCPU, runDelay time.Duration
	gcCycles        uint64
	ok              bool // the thread's statistics were readable
}

// startWallSplit pins the goroutine to its thread and reads the thread's statistics; finish
// unpins it.
func startWallSplit() *wallSplit {
	runtime.LockOSThread()
	w := &wallSplit{gcCycles: gcCycles()}
	w.onCPU, w.runDelay, w.ok = threadSchedstat()
	w.start = time.Now()
	return w
}

// finish returns the log fields of the stretch since start: its CPU time on this thread
// (mark assists included), its time waiting for a CPU, the rest of its wall time (waiting for
// the Go scheduler) and the collections that ended during it.
func (w *wallSplit) finish() []zap.Field {
	wall := time.Since(w.start)
	onCPU, runDelay, ok := threadSchedstat()
	cycles := gcCycles() - w.gcCycles
	runtime.UnlockOSThread()
	if !ok || !w.ok {
		return nil
	}
	cpu, queued := onCPU-w.onCPU, runDelay-w.runDelay
	return []zap.Field{zap.Duration("translatedCPU", cpu), zap.Duration("translatedRunQueue", queued),
		zap.Duration("translatedGoWait", max(0, wall-cpu-queued)), zap.Uint64("translatedGCs", cycles)}
}

// threadSchedstat reads the calling thread's time on a CPU and time in a run queue.
func threadSchedstat() (onCPU, runDelay time.Duration, ok bool) {
	raw, err := os.ReadFile("/proc/thread-self/schedstat")
	if err != nil {
		return 0, 0, false
	}
	f := strings.Fields(string(raw))
	if len(f) < 2 {
		return 0, 0, false
	}
	a, err1 := strconv.ParseInt(f[0], 10, 64)
	b, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return time.Duration(a), time.Duration(b), true
}

// gcCycles is the count of completed collections.
func gcCycles() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
