package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc is a process the runner started, pinned to a CPU set with taskset (which execs the program,
// so the pid is the program's own).
type proc struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
}

// start runs bin with args on cpus, its output going to <dir>/<name>.log.
func start(dir, name, cpus string, env []string, bin string, args ...string) (*proc, error) {
	lf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("taskset", append([]string{"-c", cpus, bin}, args...)...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = lf.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: lf, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the process group it leads (nginx workers included), then SIGKILL after 10s.
func (p *proc) stop() {
	if p == nil {
		return
	}
	_ = syscall.Kill(-p.pid(), syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
		<-p.done
	}
	_ = p.log.Close()
}

// tail is the end of the process's log, for error messages.
func (p *proc) tail() string {
	b, _ := os.ReadFile(p.log.Name())
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// tree is pid and its descendants (nginx's master and workers).
func tree(pid int) []int {
	out := []int{pid}
	ents, _ := os.ReadDir("/proc")
	parent := map[int]int{}
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp, ok := readPPID(n); ok {
			parent[n] = pp
		}
	}
	for changed := true; changed; {
		changed = false
		for c, pp := range parent {
			if contains(out, pp) && !contains(out, c) {
				out = append(out, c)
				changed = true
			}
		}
	}
	return out
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// statFields are the fields of /proc/<pid>/stat after the command name.
func statFields(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

func readPPID(pid int) (int, bool) {
	f := statFields(pid)
	if len(f) < 2 {
		return 0, false
	}
	n, err := strconv.Atoi(f[1])
	return n, err == nil
}

// clkTck is USER_HZ, 100 on every Linux this runs on.
const clkTck = 100

// cpuSeconds is the user+system CPU time of pid and its descendants.
func cpuSeconds(pid int) float64 {
	var ticks int64
	for _, p := range tree(pid) {
		f := statFields(p)
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		s, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + s
	}
	return float64(ticks) / clkTck
}

// rssKiB is the resident set of pid and its descendants.
func rssKiB(pid int) int64 {
	var total int64
	for _, p := range tree(pid) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				n, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
				total += n
			}
		}
	}
	return total
}

// waitHTTP polls url until it answers 200 (or any status when anyStatus), until the deadline.
func waitHTTP(ctx context.Context, p *proc, url string, anyStatus bool, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	var last error
	for {
		if p != nil && p.exited() {
			return fmt.Errorf("%s exited: %s", p.name, p.tail())
		}
		resp, err := c.Get(url)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == 200 || anyStatus {
				return nil
			}
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready at %s: %w", name(p), url, errors.Join(last, ctx.Err()))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func name(p *proc) string {
	if p == nil {
		return "server"
	}
	return p.name
}

// waitClosed polls until addr refuses connections.
func waitClosed(addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			return nil
		}
		_ = c.Close()
		if time.Now().After(deadline) {
			return fmt.Errorf("%s still accepting", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// loadAvg is the first field of /proc/loadavg: how busy the machine was.
func loadAvg() float64 {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
