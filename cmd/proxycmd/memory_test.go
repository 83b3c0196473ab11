package proxycmd

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

func TestCgroupMemoryLimit(t *testing.T) {
	tests := []struct {
		name   string
		cgroup string
		files  map[string]string
		limit  int64
		ok     bool
	}{
		{name: "v2 own cgroup", cgroup: "0::/kubepods/pod1/c1\n",
			files: map[string]string{"sys/fs/cgroup/kubepods/pod1/c1/memory.max": "268435456\n"}, limit: 256 << 20, ok: true},
		{name: "v2 namespaced root", cgroup: "0::/\n",
			files: map[string]string{"sys/fs/cgroup/memory.max": "134217728\n"}, limit: 128 << 20, ok: true},
		{name: "v2 no limit", cgroup: "0::/\n", files: map[string]string{"sys/fs/cgroup/memory.max": "max\n"}},
		{name: "v1 own cgroup", cgroup: "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n",
			files: map[string]string{"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "536870912\n"}, limit: 512 << 20, ok: true},
		{name: "v1 namespaced, no limit", cgroup: "4:memory:/process_api/x\n0::/\n",
			files: map[string]string{"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n"}},
		{name: "hybrid: v1 memory wins", cgroup: "4:memory:/a\n0::/a\n",
			files: map[string]string{"sys/fs/cgroup/memory/a/memory.limit_in_bytes": "1073741824\n"}, limit: 1 << 30, ok: true},
		{name: "no cgroup files", cgroup: "0::/\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			files := map[string]string{"proc/self/cgroup": tt.cgroup}
			for k, v := range tt.files {
				files[k] = v
			}
			for name, content := range files {
				p := filepath.Join(root, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			limit, ok := cgroupMemoryLimit(root)
			if limit != tt.limit || ok != tt.ok {
				t.Fatalf("got %d, %v; want %d, %v", limit, ok, tt.limit, tt.ok)
			}
		})
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		err  bool
	}{
		{in: "200MiB", want: 200 << 20},
		{in: "1GiB", want: 1 << 30},
		{in: "512KiB", want: 512 << 10},
		{in: "1000B", want: 1000},
		{in: "123456", want: 123456},
		{in: "2TiB", want: 2 << 40},
		{in: "200MB", err: true},
		{in: "-1MiB", err: true},
		{in: "0", err: true},
		{in: "MiB", err: true},
		{in: "99999999999TiB", err: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseSize(tt.in)
			if (err != nil) != tt.err || got != tt.want {
				t.Fatalf("parseSize(%q) = %d, %v", tt.in, got, err)
			}
		})
	}
}

// TestReleaserCoalesces: requests while a release is pending join it; one after it ran schedules
// another.
func TestReleaserCoalesces(t *testing.T) {
	runs := 0
	var scheduled []func()
	r := newReleaser(time.Second)
	r.free = func() { runs++ }
	r.after = func(d time.Duration, f func()) {
		if d != time.Second {
			t.Errorf("delay %v", d)
		}
		scheduled = append(scheduled, f)
	}
	for range 10 {
		r.soon()
	}
	if len(scheduled) != 1 {
		t.Fatalf("%d releases scheduled by a burst, want 1", len(scheduled))
	}
	scheduled[0]()
	r.soon()
	if len(scheduled) != 2 || runs != 1 {
		t.Fatalf("%d scheduled, %d run; want 2 and 1", len(scheduled), runs)
	}
	scheduled[1]()
	if runs != 2 {
		t.Fatalf("%d runs, want 2", runs)
	}
}

func TestLowerGC(t *testing.T) {
	orig := debug.SetGCPercent(100)
	defer debug.SetGCPercent(orig)
	tests := []struct {
		name           string
		start, percent int
		during         int
	}{
		{name: "lowered", start: 100, percent: 25, during: 25},
		{name: "already lower", start: 10, percent: 25, during: 10},
		{name: "off stays off", start: -1, percent: 25, during: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			debug.SetGCPercent(tt.start)
			restore := lowerGC(tt.percent)
			if got := debug.SetGCPercent(tt.during); got != tt.during {
				t.Fatalf("GOGC %d during, want %d", got, tt.during)
			}
			restore()
			if got := debug.SetGCPercent(100); got != tt.start {
				t.Fatalf("GOGC %d after, want %d", got, tt.start)
			}
		})
	}
}

func TestMemoryLimitFlag(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	_, stderr, code := runWith("proxy", "--discovery-address", "127.0.0.1:1", "--memory-limit", "lots")
	if code != 2 || !strings.Contains(stderr, "--memory-limit") {
		t.Fatalf("code %d, stderr %q", code, stderr)
	}
}
