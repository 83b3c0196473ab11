// Command runner runs Coxswain's benchmarks side by side with nginx, HAProxy and Caddy on this
// machine (bench/run.sh installs the peers and tools and then calls it; `make bench` calls that).
//
// Layout: every proxy runs on the proxy CPU (taskset, one worker / one thread / GOMAXPROCS=1); the
// backend and the load generator share the other CPU. Peers run interleaved (round 1: coxswain,
// nginx, haproxy, caddy; round 2: the same; ...), each case at least -runs rounds, and the summary
// gives medians and the median of the per-round ratios Coxswain/peer. Errors and non-2xx responses
// are counted in every run. Everything goes to bench/results/<UTC stamp>.json and latest.json.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
)

type options struct {
	benches     []string
	peers       []string
	runs        int
	duration    time.Duration
	out         string
	bin         string
	keep        bool
	bodies      []string
	conns       []int
	coxswainEnv []string
	variants    []variant
	// coxswainFlags are extra `coxswain serve` flags per Coxswain peer name ("coxswain" or a
	// variant's): the same binary run twice with different flags (metrics on and off).
	coxswainFlags map[string][]string
}

// variant is another Coxswain build measured as if it were a peer (before/after comparisons).
type variant struct{ name, bin string }

var bgCtx = context.Background()

func contextBG() context.Context { return bgCtx }

func main() {
	var o options
	benches := flag.String("bench", "b1,b2,b7,b8", "benchmarks to run: b1,b2,b3,b4,b7,b8,h3,grpc,l4tcp,l4tls,l4udp,filters,lb,extauth,ingress")
	peers := flag.String("peers", "nginx,haproxy,caddy", "peer proxies")
	flag.IntVar(&o.runs, "runs", 5, "rounds per case (interleaved A/B/A/B)")
	flag.DurationVar(&o.duration, "duration", 5*time.Second, "length of one measured run")
	flag.StringVar(&o.out, "out", "bench/results", "results directory")
	flag.StringVar(&o.bin, "bin", ".cache/bench/bin", "directory with coxswain, caddy and backend binaries")
	flag.BoolVar(&o.keep, "keep", false, "keep the scratch directory (configs, logs)")
	bodies := flag.String("bodies", "12,1k,16k", "B1 body sizes")
	conns := flag.String("conns", "16,64,256", "B1 connection counts")
	coxEnv := flag.String("coxswain-env", "", "extra environment for coxswain, comma-separated (e.g. GOGC=200)")
	variants := flag.String("variants", "", "other coxswain builds to run as peers, name=binary,... (before/after)")
	coxFlags := flag.String("coxswain-flags", "",
		"extra serve flags per Coxswain peer, name=FLAGS;name=FLAGS (e.g. \"off=--access-log=false --request-metrics=false\")")
	proxyCPU := flag.String("proxy-cpu", "0", "CPU set of the proxies")
	loadCPU := flag.String("load-cpu", "1", "CPU set of the backend and the load generator")
	flag.Parse()
	o.benches = strings.Split(*benches, ",")
	o.peers = strings.Split(*peers, ",")
	o.bodies = strings.Split(*bodies, ",")
	for _, c := range strings.Split(*conns, ",") {
		var n int
		_, _ = fmt.Sscan(c, &n)
		o.conns = append(o.conns, n)
	}
	for _, v := range strings.Split(*variants, ",") {
		if name, bin, ok := strings.Cut(v, "="); ok {
			abs, _ := filepath.Abs(bin)
			o.variants = append(o.variants, variant{name: name, bin: abs})
			o.peers = append(o.peers, name)
		}
	}
	o.coxswainFlags = map[string][]string{}
	for _, spec := range strings.Split(*coxFlags, ";") {
		if name, fl, ok := strings.Cut(spec, "="); ok {
			o.coxswainFlags[strings.TrimSpace(name)] = strings.Fields(fl)
		}
	}
	if *coxEnv != "" {
		o.coxswainEnv = strings.Split(*coxEnv, ",")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	bgCtx = ctx
	if err := runAll(ctx, o, *proxyCPU, *loadCPU); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func runAll(ctx context.Context, o options, proxyCPU, loadCPU string) error {
	dir, err := os.MkdirTemp("", "coxswain-bench-")
	if err != nil {
		return err
	}
	if !o.keep {
		defer func() { _ = os.RemoveAll(dir) }()
	} else {
		fmt.Println("scratch directory:", dir)
	}
	e := &env{ctx: ctx, dir: dir, opts: o, proxyCPU: proxyCPU, loadCPU: loadCPU, res: &results{}}
	e.data = tmplData{Dir: dir, Ports: defaultPorts}
	if err := writeCert(dir, &e.data); err != nil {
		return err
	}
	if slices.Contains(o.benches, "filters") {
		// Every peer is configured once, at its start: the filter routes are in from the
		// beginning, and the other benchmarks of the same run carry them too (their paths
		// do not match /chain, /basic or /gzip).
		if e.data.Filters, err = newFilterData(dir); err != nil {
			return err
		}
	}
	if slices.Contains(o.benches, "extauth") {
		e.data.ExtAuth = &extAuthData{}
	}
	if slices.Contains(o.benches, "lb") {
		e.data.LB = newLBData(e.data.Ports)
	}
	if slices.Contains(o.benches, "ingress") {
		e.data.Ingress = &ingressData{HTTPPort: ingressHTTPPort, HTTPSPort: ingressHTTPSPort}
		e.opts.coxswainFlags["coxswain"] = append(e.opts.coxswainFlags["coxswain"], ingressFlags()...)
	}
	// HTTP/3 only when its benchmark runs: the others then measure the peers without Alt-Svc.
	e.data.HTTP3 = slices.Contains(o.benches, "h3")
	abs := func(p string) string { a, _ := filepath.Abs(p); return a }
	e.bin = binaries{
		coxswain: abs(filepath.Join(o.bin, "coxswain")),
		caddy:    abs(filepath.Join(o.bin, "caddy")),
		backend:  abs(filepath.Join(o.bin, "bench-backend")),
		nginx:    "/usr/sbin/nginx",
		haproxy:  "/usr/sbin/haproxy",
	}
	if e.load, err = newLoader(loadCPU, dir); err != nil {
		return err
	}
	e.res.Meta = meta{Started: time.Now(), CPUs: runtime.NumCPU(), CPUModel: cpuModel(), Versions: e.versions(),
		LoadStart: loadAvg(), Options: map[string]string{
			"bench": strings.Join(o.benches, ","), "peers": strings.Join(o.peers, ","),
			"runs": fmt.Sprint(o.runs), "duration": o.duration.String(), "proxy_cpu": proxyCPU, "load_cpu": loadCPU,
			"coxswain_env": strings.Join(o.coxswainEnv, ","),
		}}
	e.res.Meta.Host, _ = os.Hostname()
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		e.res.Meta.Kernel = strings.TrimSpace(string(b))
	}
	fmt.Printf("machine: %d CPUs (%s), load average %.2f; proxies on CPU %s, backend and load on CPU %s\n",
		e.res.Meta.CPUs, e.res.Meta.CPUModel, e.res.Meta.LoadStart, proxyCPU, loadCPU)

	if err := e.startBackend(); err != nil {
		return err
	}
	defer e.backend.stop()
	e.peers = e.newPeers()

	var errs []string
	for _, b := range o.benches {
		if ctx.Err() != nil {
			break
		}
		start := time.Now()
		fmt.Printf("\n=== %s (load average %.2f)\n", strings.ToUpper(b), loadAvg())
		var err error
		switch b {
		case "b1":
			err = e.b1()
		case "b2":
			err = e.b2()
		case "b3":
			err = e.b3()
		case "b4":
			err = e.b4()
		case "h3":
			err = e.h3()
		case "b7":
			err = e.b7()
		case "b8":
			err = e.b8()
		case "grpc":
			err = e.grpcBench()
		case "filters":
			err = e.filters()
		case "lb":
			err = e.lb()
		case "ingress":
			err = e.ingressBench()
		case "extauth":
			err = e.extAuth()
		case "l4tcp":
			err = e.l4tcp()
		case "l4tls":
			err = e.l4tls()
		case "l4udp":
			err = e.l4udp()
		default:
			err = fmt.Errorf("unknown benchmark %q", b)
		}
		e.stopPeers()
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", b, err))
			fmt.Fprintf(os.Stderr, "%s failed: %v\n", b, err)
		}
		fmt.Printf("=== %s took %s\n", strings.ToUpper(b), time.Since(start).Round(time.Second))
	}
	e.res.Meta.Finished, e.res.Meta.LoadEnd = time.Now(), loadAvg()
	path, err := e.res.write(o.out)
	if err != nil {
		return err
	}
	fmt.Printf("\nresults: %s (load average at the end %.2f)\n", path, e.res.Meta.LoadEnd)
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// startPeers starts the named proxies (all idle but the one under load at any moment).
func (e *env) startPeers(names ...string) ([]string, error) {
	var started []string
	for _, n := range names {
		pe, ok := e.peers[n]
		if !ok {
			continue
		}
		if pe.p == nil {
			if err := pe.start(); err != nil {
				return started, fmt.Errorf("%s: %w", n, err)
			}
		}
		started = append(started, n)
	}
	return started, nil
}

func (e *env) stopPeers() {
	for _, pe := range e.peers {
		pe.stop()
	}
}

// order is coxswain first, then the peers as given.
func (e *env) order() []string {
	return append([]string{"coxswain"}, e.opts.peers...)
}

func (e *env) versions() map[string]string {
	v := map[string]string{"go": runtime.Version()}
	for name, args := range map[string][]string{
		"nginx":    {"/usr/sbin/nginx", "-v"},
		"haproxy":  {"/usr/sbin/haproxy", "-v"},
		"wrk":      {"wrk", "-v"},
		"h2load":   {"h2load", "--version"},
		"caddy":    {"go", "version", "-m", filepath.Join(e.opts.bin, "caddy")},
		"coxswain": {filepath.Join(e.opts.bin, "coxswain"), "version"},
	} {
		out, _ := exec.Command(args[0], args[1:]...).CombinedOutput()
		line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
		if name == "caddy" { // go version -m: the module line carries the version
			for _, l := range strings.Split(string(out), "\n") {
				if f := strings.Fields(l); len(f) >= 3 && f[0] == "mod" && f[1] == "github.com/caddyserver/caddy/v2" {
					line = "caddy " + f[2]
				}
			}
		}
		v[name] = line
	}
	return v
}

// round runs f for every proxy in names, runs times, interleaved, recording each run.
func (e *env) rounds(bench, kase string, names []string, f func(pe *peer) (map[string]float64, error)) error {
	for r := 1; r <= e.opts.runs; r++ {
		for _, n := range names {
			if e.ctx.Err() != nil {
				return e.ctx.Err()
			}
			m, err := f(e.peers[n])
			if err != nil {
				return fmt.Errorf("%s %s %s run %d: %w", bench, kase, n, r, err)
			}
			e.res.add(runRow{Bench: bench, Case: kase, Proxy: n, Run: r, LoadAvg: loadAvg(), Metrics: m})
		}
	}
	return nil
}
