package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"text/template"
	"time"
)

// The gRPC benchmark's ports (127.0.0.1), apart from the HTTP benchmarks' and B7's.
const (
	grpcBackendPort  = 18360
	grpcCoxswainPort = 18361
	grpcCoxswainAdm  = 18362
	grpcNginxPort    = 18363
	grpcCaddyPort    = 18364
	grpcHAProxyPort  = 18365
	grpcVariantPort  = 18370 // + i for -variants, admin at grpcVariantAdm + i
	grpcVariantAdm   = 18380
)

// grpcCases are the (connections, calls in flight) pairs measured.
var grpcCases = []struct{ conns, concurrency int }{{1, 1}, {1, 16}, {1, 64}, {4, 64}}

// grpcTmpl is what the gRPC templates see.
type grpcTmpl struct {
	Dir           string
	Port, Backend int
}

// grpcBench is unary gRPC (grpc.testing.TestService/UnaryCall, empty messages) from a grpc-go
// closed-loop client at fixed calls in flight over 1 or several connections: straight to the
// grpc-go backend ("direct"), through Coxswain (GRPCRoute, h2c upstream from appProtocol
// kubernetes.io/h2c), and through nginx grpc_pass, HAProxy and Caddy as peers (those in -peers).
// Calls/s, p50 and p99 from every call, proxy CPU per call, failures by status.
func (e *env) grpcBench() error {
	bin, err := e.grpcTool()
	if err != nil {
		return err
	}
	// A leftover process on one of the ports would be measured in place of the one started.
	for _, port := range []int{grpcBackendPort, grpcCoxswainPort, grpcCoxswainAdm, grpcNginxPort, grpcCaddyPort, grpcHAProxyPort} {
		if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 200*time.Millisecond); err == nil {
			_ = c.Close()
			return fmt.Errorf("port %d is already in use", port)
		}
	}
	be, err := start(e.dir, "grpc-backend", e.loadCPU, []string{"GOMAXPROCS=1"}, bin, "serve",
		"-listen", "127.0.0.1:"+strconv.Itoa(grpcBackendPort))
	if err != nil {
		return err
	}
	defer be.stop()
	if err := waitTCP(be, grpcBackendPort, 20*time.Second); err != nil {
		return err
	}
	peers := e.grpcPeers()
	defer func() {
		for _, pe := range peers {
			pe.stop()
		}
	}()
	var names []string
	for _, n := range append([]string{"direct", "coxswain"}, e.opts.peers...) {
		pe, ok := peers[n]
		if !ok {
			continue
		}
		if pe.startF != nil {
			p, err := pe.startF()
			if err != nil {
				return fmt.Errorf("%s: %w", n, err)
			}
			pe.p = p
		}
		names = append(names, n)
	}
	keys := []string{"rps", "p50_us", "p99_us", "cpu_us_per_call", "failures"}
	for _, c := range grpcCases {
		kase := fmt.Sprintf("unary conns=%d in-flight=%d", c.conns, c.concurrency)
		for r := 1; r <= e.opts.runs; r++ {
			for _, n := range names {
				if e.ctx.Err() != nil {
					return e.ctx.Err()
				}
				pe := peers[n]
				var s grpcSummary
				_, cpu, err := e.measured(pe, func() (int64, error) {
					var err error
					s, err = e.grpcLoad(bin, pe.http, c.conns, c.concurrency)
					return s.Calls, err
				})
				if err != nil {
					return fmt.Errorf("gRPC %s %s run %d: %w", kase, n, r, err)
				}
				if s.Failures > 0 { // a deadline under load, or a proxy's error: say which
					fmt.Printf("  note: %s %s run %d: %d failed calls %v\n", kase, n, r, s.Failures, s.Codes)
				}
				e.res.add(runRow{Bench: "GRPC", Case: kase, Proxy: n, Run: r, LoadAvg: loadAvg(), Metrics: map[string]float64{
					"rps": s.RPS, "p50_us": s.P50, "p99_us": s.P99, "p999_us": s.P999, "cpu_us_per_call": cpu,
					"failures": float64(s.Failures)}})
			}
		}
		e.res.summarize(os.Stdout, "GRPC", kase, names, keys)
	}
	return nil
}

// grpcPeers describes direct (the backend), Coxswain and its -variants, nginx, HAProxy and Caddy;
// peer.http holds the host:port to call.
func (e *env) grpcPeers() map[string]*peer {
	addr := func(p int) string { return "127.0.0.1:" + strconv.Itoa(p) }
	tmpl := func(port int) grpcTmpl { return grpcTmpl{Dir: e.dir, Port: port, Backend: grpcBackendPort} }
	out := map[string]*peer{
		"direct": {name: "direct", http: addr(grpcBackendPort)},
		"coxswain": {name: "coxswain", http: addr(grpcCoxswainPort), startF: func() (*proc, error) {
			return e.grpcCoxswain("coxswain", e.bin.coxswain, grpcCoxswainPort, grpcCoxswainAdm)
		}},
		"nginx": {name: "nginx", http: addr(grpcNginxPort), startF: func() (*proc, error) {
			conf := filepath.Join(e.dir, "grpc-nginx.conf")
			if err := renderGRPC("grpc-nginx.conf.tmpl", conf, tmpl(grpcNginxPort)); err != nil {
				return nil, err
			}
			return grpcWait(grpcNginxPort)(start(e.dir, "grpc-nginx", e.proxyCPU, nil, e.bin.nginx, "-e", "stderr", "-p", e.dir, "-c", conf))
		}},
		"haproxy": {name: "haproxy", http: addr(grpcHAProxyPort), startF: func() (*proc, error) {
			conf := filepath.Join(e.dir, "grpc-haproxy.cfg")
			if err := renderGRPC("grpc-haproxy.cfg.tmpl", conf, tmpl(grpcHAProxyPort)); err != nil {
				return nil, err
			}
			return grpcWait(grpcHAProxyPort)(start(e.dir, "grpc-haproxy", e.proxyCPU, nil, e.bin.haproxy, "-db", "-f", conf))
		}},
		"caddy": {name: "caddy", http: addr(grpcCaddyPort), startF: func() (*proc, error) {
			conf := filepath.Join(e.dir, "grpc-Caddyfile")
			if err := renderGRPC("grpc-Caddyfile.tmpl", conf, tmpl(grpcCaddyPort)); err != nil {
				return nil, err
			}
			return grpcWait(grpcCaddyPort)(start(e.dir, "grpc-caddy", e.proxyCPU, []string{"GOMAXPROCS=1", "HOME=" + e.dir,
				"XDG_DATA_HOME=" + e.dir, "XDG_CONFIG_HOME=" + e.dir}, e.bin.caddy, "run", "--config", conf, "--adapter", "caddyfile"))
		}},
	}
	for i, v := range e.opts.variants {
		port, adm := grpcVariantPort+i, grpcVariantAdm+i
		out[v.name] = &peer{name: v.name, http: addr(port), startF: func() (*proc, error) {
			return e.grpcCoxswain(v.name, v.bin, port, adm)
		}}
	}
	return out
}

// grpcCoxswain renders the gRPC manifests into their own directory and runs `coxswain serve` on
// them (GOMAXPROCS=1 on the proxy CPU), waiting for /readyz.
func (e *env) grpcCoxswain(name, bin string, port, adm int) (*proc, error) {
	dir := filepath.Join(e.dir, "grpc-"+name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	d := grpcTmpl{Dir: e.dir, Port: port, Backend: grpcBackendPort}
	if err := renderGRPC("grpc-coxswain.yaml.tmpl", filepath.Join(dir, "grpc.yaml"), d); err != nil {
		return nil, err
	}
	return e.startCoxswainBin("grpc-"+name, dir, bin, adm)
}

// grpcWait waits for a freshly started peer's port to accept connections.
func grpcWait(port int) func(p *proc, err error) (*proc, error) {
	return func(p *proc, err error) (*proc, error) {
		if err != nil {
			return nil, err
		}
		if err := waitTCP(p, port, 60*time.Second); err != nil {
			p.stop()
			return nil, err
		}
		return p, nil
	}
}

// renderGRPC renders a gRPC template (write then rename, like render).
func renderGRPC(name, dst string, d grpcTmpl) error {
	t, err := template.ParseFS(templates, "templates/"+name)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, d); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	tmp := filepath.Join(filepath.Dir(filepath.Dir(dst)), "."+filepath.Base(dst)+".tmp")
	if err := os.WriteFile(tmp, b.Bytes(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}

// waitTCP polls until port accepts a connection.
func waitTCP(p *proc, port int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if p.exited() {
			return fmt.Errorf("%s exited: %s", p.name, p.tail())
		}
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 200*time.Millisecond)
		if err == nil {
			_ = c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not accepting on %d: %w", p.name, port, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// grpcSummary is grpcbench load's summary line.
type grpcSummary struct {
	Calls    int64            `json:"calls"`
	Failures int64            `json:"failures"`
	RPS      float64          `json:"rps"`
	P50      float64          `json:"p50"`
	P99      float64          `json:"p99"`
	P999     float64          `json:"p999"`
	Codes    map[string]int64 `json:"codes"` // failures by gRPC status code
}

// grpcLoad runs one measured load (1 s warm-up) on the load CPU.
func (e *env) grpcLoad(bin, target string, conns, concurrency int) (grpcSummary, error) {
	out, err := run(e.ctx, e.opts.duration+30*time.Second, "taskset", "-c", e.loadCPU, bin, "load",
		"-target", target, "-conns", strconv.Itoa(conns), "-concurrency", strconv.Itoa(concurrency),
		"-duration", e.opts.duration.String(), "-warmup", "1s")
	if err != nil {
		return grpcSummary{}, fmt.Errorf("grpcbench load: %w: %s", err, out)
	}
	i := bytes.LastIndex(out, []byte("GRPCJSON "))
	if i < 0 {
		return grpcSummary{}, fmt.Errorf("grpcbench printed no summary: %s", out)
	}
	line, _, _ := bytes.Cut(out[i+len("GRPCJSON "):], []byte("\n"))
	var s grpcSummary
	if err := json.Unmarshal(line, &s); err != nil {
		return grpcSummary{}, fmt.Errorf("grpcbench summary %q: %w", line, err)
	}
	return s, nil
}

// grpcTool builds bench/grpcbench next to the other binaries (the runner runs from the repository
// root, as run.sh starts it); an existing binary is used when there is no Go toolchain.
func (e *env) grpcTool() (string, error) {
	bin := filepath.Join(filepath.Dir(e.bin.coxswain), "bench-grpc")
	ctx, cancel := context.WithTimeout(e.ctx, 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "./bench/grpcbench").CombinedOutput()
	if err != nil {
		if _, serr := os.Stat(bin); serr == nil {
			fmt.Printf("  note: go build ./bench/grpcbench failed (%v), using the existing %s\n", err, bin)
			return bin, nil
		}
		return "", fmt.Errorf("building bench/grpcbench: %w: %s", err, out)
	}
	return bin, nil
}
