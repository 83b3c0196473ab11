package main

import (
	"bytes"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/template"
	"time"
)

// Layer-4 benchmarks (l4tcp, l4tls, l4udp): their own backend (bench/l4backend), their own peers'
// configurations (nginx `stream`, HAProxy `mode tcp`; Caddy has no layer-4 proxy without a
// plugin) and their own ports, 18240-18299, so that they share nothing with the HTTP benchmarks
// but the result file.

var (
	l4Streams    = flag.String("l4-streams", "1,16", "L4: concurrent connections of the throughput cases")
	l4RateConns  = flag.Int("l4-rate-conns", 32, "L4: concurrent workers of the connection-rate case")
	l4UDP        = flag.String("l4-udp", "64x1,4x32", "L4 UDP cases, clients x datagrams in flight per client")
	l4Payload    = flag.Int("l4-payload", 64, "L4: bytes echoed per connection (connection rate) and per datagram")
	l4NginxBuf   = flag.String("l4-nginx-buffer", "16k", "L4: nginx stream proxy_buffer_size (16k is nginx's default; 64k measured no better)")
	l4HAPipe     = flag.Int("l4-haproxy-pipesize", 1<<20, "L4: HAProxy tune.pipesize in bytes (0: the kernel's 64 KiB; 1 MiB is what Go's splice uses)")
	l4HANoSplice = flag.Bool("l4-haproxy-nosplice", false, "L4: run HAProxy without option splice-request/splice-response")
	l4CPUProfile = flag.String("l4-cpuprofile", "", "L4: directory for CPU profiles of coxswain (run 1 of each case; needs bin/coxswain-pprof)")
)

// l4Ports are one proxy's layer-4 listeners.
type l4Ports struct {
	TCP, TLS, UDP, Admin int
}

// l4Data is what the layer-4 templates see.
type l4Data struct {
	Dir, Cert, Key, CertB64, KeyB64 string
	Backend                         l4Ports // TCP, TLS (the TLS echo/sink), UDP
	Coxswain, Nginx, HAProxy        l4Ports
	NginxModule                     string
	NginxBuffer                     string
	HAProxyPipe                     int
	HAProxySplice                   bool
	SNI                             string
}

const l4SNI = "bench.example.com"

var l4DefaultData = l4Data{
	Backend:     l4Ports{TCP: 18240, TLS: 18241, UDP: 18242},
	Coxswain:    l4Ports{TCP: 18250, TLS: 18251, UDP: 18252, Admin: 18253},
	Nginx:       l4Ports{TCP: 18260, TLS: 18261, UDP: 18262},
	HAProxy:     l4Ports{TCP: 18270, TLS: 18271},
	NginxModule: "/usr/lib/nginx/modules/ngx_stream_module.so",
	SNI:         l4SNI,
}

// l4pprofPort is where the profiling build of coxswain serves net/http/pprof.
const l4pprofPort = 18254

// l4Peer is one proxy under layer-4 load, with its listener addresses ("" for none).
type l4Peer struct {
	name          string
	tcp, tls, udp string
	startF        func() (*proc, error)
	p             *proc
}

func (pe *l4Peer) start() error {
	if pe.p != nil {
		return nil
	}
	p, err := pe.startF()
	if err != nil {
		return err
	}
	if err := waitL4(p, pe.tcp, 60*time.Second); err != nil {
		p.stop()
		return err
	}
	pe.p = p
	return nil
}

func (pe *l4Peer) stop() {
	if pe.p != nil {
		pe.p.stop()
		pe.p = nil
	}
}

func hostPort(port int) string {
	if port == 0 {
		return ""
	}
	return "127.0.0.1:" + strconv.Itoa(port)
}

// waitL4 polls until addr accepts a connection.
func waitL4(p *proc, addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if p.exited() {
			return fmt.Errorf("%s exited: %s", p.name, p.tail())
		}
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			_ = c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not accepting at %s: %w", p.name, addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// l4Env is one layer-4 benchmark's processes.
type l4Env struct {
	*env
	data    l4Data
	backend *proc
	peers   map[string]*l4Peer
	names   []string // coxswain first, then the peers that have the protocol
}

// newL4 starts the layer-4 backend and describes the peers; udp selects the peers that proxy UDP.
func (e *env) newL4(udp bool) (*l4Env, error) {
	d := l4DefaultData
	d.Dir, d.Cert, d.Key, d.CertB64, d.KeyB64 = e.dir, e.data.Cert, e.data.Key, e.data.CertB64, e.data.KeyB64
	d.NginxBuffer, d.HAProxyPipe, d.HAProxySplice = *l4NginxBuf, *l4HAPipe, !*l4HANoSplice
	l := &l4Env{env: e, data: d, peers: map[string]*l4Peer{}}
	// A port already taken (a leftover process) would make a proxy or the backend fail to bind while
	// the readiness checks still succeed against the intruder.
	for _, pt := range []l4Ports{d.Backend, d.Coxswain, d.Nginx, d.HAProxy} {
		for _, port := range []int{pt.TCP, pt.TLS, pt.Admin} {
			if c, err := net.DialTimeout("tcp", hostPort(port), 200*time.Millisecond); port != 0 && err == nil {
				_ = c.Close()
				return nil, fmt.Errorf("port %d is already in use", port)
			}
		}
	}
	p, err := start(e.dir, "l4backend", e.loadCPU, []string{"GOMAXPROCS=1"}, filepath.Join(filepath.Dir(e.bin.backend), "bench-l4backend"),
		"-tcp", hostPort(d.Backend.TCP), "-tls", hostPort(d.Backend.TLS), "-udp", hostPort(d.Backend.UDP),
		"-cert", d.Cert, "-key", d.Key)
	if err != nil {
		return nil, err
	}
	l.backend = p
	if err := waitL4(p, hostPort(d.Backend.TCP), 20*time.Second); err != nil {
		p.stop()
		return nil, err
	}
	cox := e.bin.coxswain
	var coxEnv []string
	if *l4CPUProfile != "" {
		cox = filepath.Join(filepath.Dir(e.bin.coxswain), "coxswain-pprof")
		coxEnv = []string{"COXSWAIN_PPROF=" + hostPort(l4pprofPort)}
	}
	l.add(l.coxswainPeer("coxswain", cox, d.Coxswain, coxEnv))
	l.names = []string{"coxswain"}
	for _, n := range e.opts.peers {
		switch n {
		case "nginx":
			l.add(&l4Peer{name: n, tcp: hostPort(d.Nginx.TCP), tls: hostPort(d.Nginx.TLS), udp: hostPort(d.Nginx.UDP), startF: l.startNginx})
		case "haproxy":
			if udp {
				continue // HAProxy 2.6 does not proxy UDP (only syslog forwarding)
			}
			l.add(&l4Peer{name: n, tcp: hostPort(d.HAProxy.TCP), tls: hostPort(d.HAProxy.TLS), startF: l.startHAProxy})
		default:
			continue // caddy: no layer-4 proxy in the stock build
		}
		l.names = append(l.names, n)
	}
	for i, v := range e.opts.variants { // other coxswain builds: before/after tables
		base := 18280 + 10*i
		l.add(l.coxswainPeer(v.name, v.bin, l4Ports{TCP: base, TLS: base + 1, UDP: base + 2, Admin: base + 3}, nil))
		l.names = append(l.names, v.name)
	}
	return l, nil
}

func (l *l4Env) add(pe *l4Peer) { l.peers[pe.name] = pe }

func (l *l4Env) stop() {
	for _, pe := range l.peers {
		pe.stop()
	}
	l.backend.stop()
}

// coxswainPeer renders a manifest directory with the L4 Gateway and routes for ports pt.
func (l *l4Env) coxswainPeer(name, bin string, pt l4Ports, env []string) *l4Peer {
	return &l4Peer{name: name, tcp: hostPort(pt.TCP), tls: hostPort(pt.TLS), udp: hostPort(pt.UDP),
		startF: func() (*proc, error) {
			dir := filepath.Join(l.dir, "l4-"+name)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, err
			}
			d := l.data
			d.Coxswain = pt
			if err := renderL4("l4-coxswain.yaml.tmpl", filepath.Join(dir, "l4.yaml"), d); err != nil {
				return nil, err
			}
			adm := hostPort(pt.Admin)
			p, err := start(l.dir, name+"-l4", l.proxyCPU, append(append([]string{"GOMAXPROCS=1"}, l.opts.coxswainEnv...), env...),
				bin, "serve", "-f", dir, "--admin-address", adm, "--log-level", "warn")
			if err != nil {
				return nil, err
			}
			if err := waitHTTP(contextBG(), p, "http://"+adm+"/readyz", false, 120*time.Second); err != nil {
				p.stop()
				return nil, err
			}
			return p, nil
		}}
}

func (l *l4Env) startNginx() (*proc, error) {
	conf := filepath.Join(l.dir, "nginx-l4.conf")
	if err := renderL4("l4-nginx.conf.tmpl", conf, l.data); err != nil {
		return nil, err
	}
	return start(l.dir, "nginx-l4", l.proxyCPU, nil, l.bin.nginx, "-e", "stderr", "-p", l.dir, "-c", conf)
}

func (l *l4Env) startHAProxy() (*proc, error) {
	conf := filepath.Join(l.dir, "haproxy-l4.cfg")
	if err := renderL4("l4-haproxy.cfg.tmpl", conf, l.data); err != nil {
		return nil, err
	}
	return start(l.dir, "haproxy-l4", l.proxyCPU, nil, l.bin.haproxy, "-db", "-f", conf)
}

// renderL4 renders a layer-4 template (templates/l4-*.tmpl, embedded with the others) to dst.
func renderL4(name, dst string, d l4Data) error {
	t, err := template.ParseFS(templates, "templates/"+name)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, d); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return os.WriteFile(dst, b.Bytes(), 0o644)
}

// knobs are the peers' configuration knobs that matter for fairness, for the result file.
func (l *l4Env) knobs() string {
	return strings.Join([]string{
		"nginx proxy_buffer_size=" + l.data.NginxBuffer,
		fmt.Sprintf("haproxy splice-request+splice-response=%v tune.pipesize=%d", l.data.HAProxySplice, l.data.HAProxyPipe),
	}, "; ")
}
