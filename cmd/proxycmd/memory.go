package proxycmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
	"github.com/coxswain-labs/coxswain/core/proxy/agent"
)

// MemoryFlags are the Go runtime's memory settings for a command that serves traffic. They
// complement a lean routing table (docs/performance.md, B8); they do not replace it.
type MemoryFlags struct {
	limit   string
	applyGC int
	release bool
}

// Register adds the memory flags to fs.
func (m *MemoryFlags) Register(fs *flag.FlagSet) {
	m.RegisterLimit(fs)
	fs.IntVar(&m.applyGC, "apply-gc-percent", 25,
		"GOGC while a snapshot is applied: a build is a burst of short-lived allocation, and collecting it more often lowers the peak (10,000 routes: about 10 MiB); 0 keeps GOGC")
	fs.BoolVar(&m.release, "release-memory-after-apply", true,
		"a second after a snapshot whose apply allocated 8 MiB or more, collect garbage and return free memory to the OS (coalesced: at most one at a time); a large build's garbage otherwise stays resident until the runtime's periodic collection, two minutes later")
}

// RegisterLimit adds --memory-limit alone to fs, for a command whose engine the other flags do
// not drive (`coxswain controller`: its heap is mostly caches and translation state, not builds).
func (m *MemoryFlags) RegisterLimit(fs *flag.FlagSet) {
	fs.StringVar(&m.limit, "memory-limit", "auto",
		`soft memory limit of the Go runtime, as GOMEMLIMIT: "auto" is 90% of the cgroup's memory limit when it has one, "off" is none, or a size such as 200MiB; a GOMEMLIMIT environment variable wins`)
}

// Engine is px wrapped as the flags say (px itself when they leave it as it is), as the discovery
// agent and the standalone runner drive it.
func (m *MemoryFlags) Engine(px *proxy.Proxy) agent.Engine {
	e := &leanEngine{Proxy: px, gcPercent: m.applyGC}
	if m.release {
		e.r = newReleaser(time.Second)
	}
	if e.gcPercent <= 0 && e.r == nil {
		return px
	}
	return e
}

// SetLimit applies --memory-limit to the runtime.
func (m *MemoryFlags) SetLimit(log *zap.Logger) error {
	if env := os.Getenv("GOMEMLIMIT"); env != "" {
		log.Info("Go memory limit from GOMEMLIMIT", zap.String("limit", env))
		return nil
	}
	var limit int64
	switch m.limit {
	case "off", "":
		return nil
	case "auto":
		cg, ok := cgroupMemoryLimit("/")
		if !ok {
			return nil
		}
		limit = cg / 10 * 9
	default:
		var err error
		if limit, err = parseSize(m.limit); err != nil {
			return fmt.Errorf("--memory-limit: %w", err)
		}
	}
	debug.SetMemoryLimit(limit)
	log.Info("Go memory limit set", zap.String("flag", m.limit), zap.Int64("bytes", limit))
	return nil
}

// releaseThreshold is how much an apply must allocate before its garbage is worth returning at
// once: a table of a few thousand routes.
const releaseThreshold = 8 << 20

// leanEngine is the proxy with the Go runtime tuned around Apply. An apply allocates several
// times its table (module configs decoded, the previous table still serving meanwhile, and the
// decoded snapshot its caller holds); with GOGC=100 the heap grows to twice what was live at the
// last collection, and an idle proxy, allocating nothing more, keeps that memory until the
// runtime's periodic collection two minutes later. So: a lower GOGC while applying (a lower peak),
// and debug.FreeOSMemory shortly after a large apply (a lower resident set after it).
type leanEngine struct {
	*proxy.Proxy
	gcPercent int       // GOGC during Apply; 0 leaves it
	r         *releaser // nil: no release after Apply
	mu        sync.Mutex
}

// Apply applies snap under a lower GOGC. Applies are serialized (the proxy serializes them
// anyway), so that each restores the GOGC it found.
func (e *leanEngine) Apply(ctx context.Context, snap *irv1.Snapshot) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	before := heapAllocBytes()
	if e.gcPercent > 0 {
		defer lowerGC(e.gcPercent)()
	}
	err := e.Proxy.Apply(ctx, snap)
	if e.r != nil && heapAllocBytes()-before >= releaseThreshold {
		e.r.soon()
	}
	return err
}

// lowerGC sets GOGC to percent unless it is already lower (or off), and returns what restores it.
func lowerGC(percent int) (restore func()) {
	old := debug.SetGCPercent(percent)
	if old < 0 || old <= percent {
		debug.SetGCPercent(old)
		return func() {}
	}
	return func() { debug.SetGCPercent(old) }
}

// releaser runs FreeOSMemory once, a delay after the first request since the last run: a burst of
// applies costs one collection, and the retired table's last requests have usually ended by then.
type releaser struct {
	delay   time.Duration
	mu      sync.Mutex
	pending bool
	free    func()
	after   func(time.Duration, func()) // time.AfterFunc; tests replace it
}

func newReleaser(delay time.Duration) *releaser {
	return &releaser{delay: delay, free: debug.FreeOSMemory,
		after: func(d time.Duration, f func()) { time.AfterFunc(d, f) }}
}

func (r *releaser) soon() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending {
		return
	}
	r.pending = true
	r.after(r.delay, func() {
		r.mu.Lock()
		r.pending = false
		r.mu.Unlock()
		r.free()
	})
}

// heapAllocBytes is the cumulative count of bytes the heap has allocated.
func heapAllocBytes() uint64 {
	sample := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return sample[0].Value.Uint64()
}

// cgroupMemoryLimit is the memory limit of this process's cgroup (v2 memory.max, or v1
// memory.limit_in_bytes), read under root ("/" outside tests); false when there is none.
func cgroupMemoryLimit(root string) (int64, bool) {
	raw, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		return 0, false
	}
	var candidates []string
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "": // v2
			candidates = append(candidates, filepath.Join(root, "sys/fs/cgroup", parts[2], "memory.max"),
				filepath.Join(root, "sys/fs/cgroup/memory.max"))
		case hasController(parts[1], "memory"): // v1
			candidates = append(candidates, filepath.Join(root, "sys/fs/cgroup/memory", parts[2], "memory.limit_in_bytes"),
				filepath.Join(root, "sys/fs/cgroup/memory/memory.limit_in_bytes"))
		}
	}
	// The first file that exists answers: the cgroup's own, else the mount's root, which is the
	// cgroup itself inside a container's cgroup namespace.
	for _, c := range candidates {
		b, err := os.ReadFile(c)
		if err != nil {
			continue
		}
		return parseCgroupLimit(strings.TrimSpace(string(b)))
	}
	return 0, false
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// parseCgroupLimit reads "max" (v2) or a byte count; v1 says "no limit" with a huge number.
func parseCgroupLimit(s string) (int64, bool) {
	if s == "max" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n >= math.MaxInt64/2 {
		return 0, false
	}
	return n, true
}

// parseSize reads a byte count as GOMEMLIMIT writes it: digits and an optional B, KiB, MiB, GiB
// or TiB.
func parseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		shift  uint
	}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}}
	num, shift := s, uint(0)
	for _, u := range units {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			num, shift = v, u.shift
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not a size (e.g. 200MiB)", s)
	}
	if n > math.MaxInt64>>shift {
		return 0, errors.New("size too large")
	}
	return n << shift, nil
}
