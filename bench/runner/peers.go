package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// peer is one proxy under test with the URLs of its listeners ("" when it lacks one).
type peer struct {
	name   string
	http   string
	https  string
	h2c    string
	startF func() (*proc, error)
	p      *proc
}

func (pe *peer) start() error {
	p, err := pe.startF()
	if err != nil {
		return err
	}
	pe.p = p
	if err := waitHTTP(contextBG(), p, pe.http+"/", false, 60*time.Second); err != nil {
		p.stop()
		pe.p = nil
		return err
	}
	return nil
}

func (pe *peer) stop() {
	if pe.p != nil {
		pe.p.stop()
		pe.p = nil
	}
}

func url(port int) string { return "http://127.0.0.1:" + strconv.Itoa(port) }

func tlsURL(port int) string { return "https://127.0.0.1:" + strconv.Itoa(port) }

// newPeers describes every proxy; only those named in opts.peers (plus coxswain) are started.
func (e *env) newPeers() map[string]*peer {
	pt := e.data.Ports
	all := map[string]*peer{
		"coxswain": {name: "coxswain", http: url(pt.CoxswainHTTP), https: tlsURL(pt.CoxswainTLS), h2c: url(pt.CoxswainHTTP),
			startF: func() (*proc, error) { return e.startCoxswain("coxswain", filepath.Join(e.dir, "coxswain")) }},
		"nginx": {name: "nginx", http: url(pt.NginxHTTP), https: tlsURL(pt.NginxTLS), h2c: url(pt.NginxH2C),
			startF: e.startNginx},
		"haproxy": {name: "haproxy", http: url(pt.HAProxyHTTP), https: tlsURL(pt.HAProxyTLS),
			startF: e.startHAProxy},
		"caddy": {name: "caddy", http: url(pt.CaddyHTTP), https: tlsURL(pt.CaddyTLS), h2c: url(pt.CaddyHTTP),
			startF: e.startCaddy},
	}
	for _, nl := range nginxLogPeers {
		all[nl.name] = &peer{name: nl.name, http: url(nl.http), https: tlsURL(nl.tls), h2c: url(nl.h2c),
			startF: func() (*proc, error) { return e.startNginxLog(nl) }}
	}
	// Other Coxswain builds (-variants name=binary), each on ports of its own: before/after tables.
	for i, v := range e.opts.variants {
		pt := e.data.Ports
		pt.CoxswainHTTP, pt.CoxswainTLS, pt.CoxswainAdm = 18140+i, 18150+i, 18160+i
		dir := filepath.Join(e.dir, "variant-"+v.name)
		all[v.name] = &peer{name: v.name, http: url(pt.CoxswainHTTP), https: tlsURL(pt.CoxswainTLS), h2c: url(pt.CoxswainHTTP),
			startF: func() (*proc, error) {
				if err := e.coxswainDirPorts(dir, pt, nil, nil); err != nil {
					return nil, err
				}
				return e.startCoxswainBin(v.name, dir, v.bin, pt.CoxswainAdm)
			}}
	}
	out := map[string]*peer{"coxswain": all["coxswain"]}
	for _, n := range e.opts.peers {
		if pe, ok := all[n]; ok {
			out[n] = pe
		}
	}
	return out
}

// startCoxswain runs `coxswain serve -f dir` on the proxy CPU with GOMAXPROCS=1 (one core, like
// nginx's one worker). It waits for /readyz.
func (e *env) startCoxswain(name, dir string) (*proc, error) {
	if _, err := os.Stat(filepath.Join(dir, "gateway.yaml")); err != nil {
		if err := e.coxswainDir(dir, nil, nil); err != nil {
			return nil, err
		}
	}
	return e.startCoxswainBin(name, dir, e.bin.coxswain, e.data.Ports.CoxswainAdm)
}

func (e *env) startCoxswainBin(name, dir, bin string, admPort int) (*proc, error) {
	adm := "127.0.0.1:" + strconv.Itoa(admPort)
	env := append([]string{"GOMAXPROCS=1"}, e.opts.coxswainEnv...)
	args := append([]string{"serve", "-f", dir, "--admin-address", adm, "--log-level", "warn"},
		e.opts.coxswainFlags[strings.TrimPrefix(name, "grpc-")]...)
	p, err := start(e.dir, name, e.proxyCPU, env, bin, args...)
	if err != nil {
		return nil, err
	}
	if err := waitHTTP(contextBG(), p, "http://"+adm+"/readyz", false, 120*time.Second); err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

func (e *env) startNginx() (*proc, error) { return e.startNginxWith("nginx", e.dir, e.data) }

// startNginxWith runs nginx configured from d, with its configuration, pid file and temporary
// directories in dir.
func (e *env) startNginxWith(name, dir string, d tmplData) (*proc, error) {
	d.Dir = dir
	conf := filepath.Join(dir, "nginx.conf")
	if err := render("nginx.conf.tmpl", conf, d); err != nil {
		return nil, err
	}
	for _, sub := range []string{"nginx-body", "nginx-proxy", "nginx-fastcgi", "nginx-uwsgi", "nginx-scgi"} {
		_ = os.MkdirAll(filepath.Join(dir, sub), 0o755)
	}
	return start(e.dir, name, e.proxyCPU, nil, e.bin.nginx, "-e", "stderr", "-p", dir, "-c", conf)
}

// nginxLogPeer is the nginx peer with its access log on: what a platform engineer would compare
// Coxswain's access log's cost with (Coxswain's is on by default; the nginx peer's is off).
type nginxLogPeer struct {
	name           string
	http, tls, h2c int
	// args follow the file in the access_log directive.
	args string
}

var nginxLogPeers = []nginxLogPeer{
	// nginx's default: the combined format, each line written with its own write(2).
	{name: "nginx-log", http: 18104, tls: 18114, h2c: 18124},
	// Buffered as a busy nginx is usually configured: one write(2) per 64 KiB or second.
	{name: "nginx-logbuf", http: 18105, tls: 18115, h2c: 18125, args: "combined buffer=64k flush=1s"},
}

// startNginxLog runs the nginx peer with its access log on, to a file in its own directory.
func (e *env) startNginxLog(nl nginxLogPeer) (*proc, error) {
	dir := filepath.Join(e.dir, nl.name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	d := e.data
	d.Ports.NginxHTTP, d.Ports.NginxTLS, d.Ports.NginxH2C = nl.http, nl.tls, nl.h2c
	d.NginxAccessLog = strings.TrimSpace(filepath.Join(dir, "access.log") + " " + nl.args)
	return e.startNginxWith(nl.name, dir, d)
}

// nginxReload is `nginx -s reload` against the running master.
func (e *env) nginxReload() error {
	conf := filepath.Join(e.dir, "nginx.conf")
	out, err := run(contextBG(), 10*time.Second, e.bin.nginx, "-e", "stderr", "-p", e.dir, "-c", conf, "-s", "reload")
	if err != nil {
		return fmt.Errorf("nginx -s reload: %w: %s", err, out)
	}
	return nil
}

func (e *env) startHAProxy() (*proc, error) {
	conf := filepath.Join(e.dir, "haproxy.cfg")
	if err := render("haproxy.cfg.tmpl", conf, e.data); err != nil {
		return nil, err
	}
	return start(e.dir, "haproxy", e.proxyCPU, nil, e.bin.haproxy, "-db", "-f", conf)
}

func (e *env) startCaddy() (*proc, error) {
	conf := filepath.Join(e.dir, "Caddyfile")
	if err := render("Caddyfile.tmpl", conf, e.data); err != nil {
		return nil, err
	}
	return start(e.dir, "caddy", e.proxyCPU, []string{"GOMAXPROCS=1", "HOME=" + e.dir, "XDG_DATA_HOME=" + e.dir, "XDG_CONFIG_HOME=" + e.dir},
		e.bin.caddy, "run", "--config", conf, "--adapter", "caddyfile")
}

// startBackend runs the benchmark backend on the load generator's CPU.
func (e *env) startBackend() error {
	pt := e.data.Ports
	p, err := start(e.dir, "backend", e.loadCPU, []string{"GOMAXPROCS=1"}, e.bin.backend,
		"-listen", fmt.Sprintf("127.0.0.1:%d,127.0.0.1:%d", pt.Backend, pt.BackendAlt),
		"-h2c", fmt.Sprintf("127.0.0.1:%d", pt.BackendH2C))
	if err != nil {
		return err
	}
	e.backend = p
	return waitHTTP(contextBG(), p, url(pt.Backend)+"/", false, 20*time.Second)
}
