package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"embed"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"text/template"
	"time"
)

//go:embed templates/*.tmpl
var templates embed.FS

// ports are every port the benchmark uses, all on 127.0.0.1.
type ports struct {
	Backend, BackendAlt, BackendH2C        int
	CoxswainHTTP, CoxswainTLS, CoxswainAdm int
	NginxHTTP, NginxTLS, NginxH2C          int
	HAProxyHTTP, HAProxyTLS                int
	CaddyHTTP, CaddyTLS                    int
}

var defaultPorts = ports{
	Backend: 18080, BackendAlt: 18081, BackendH2C: 18082,
	CoxswainHTTP: 18100, CoxswainTLS: 18110, CoxswainAdm: 18190,
	NginxHTTP: 18101, NginxTLS: 18111, NginxH2C: 18121,
	HAProxyHTTP: 18102, HAProxyTLS: 18112,
	CaddyHTTP: 18103, CaddyTLS: 18113,
}

// churnState is B7's churn route in one generation.
type churnState struct {
	Backend    string
	Header     bool
	Generation int
}

type backendSvc struct {
	Name string
	Port int
	H2C  bool
}

// tmplData is what the templates see.
type tmplData struct {
	Dir, Cert, Key, Combined string
	CertB64, KeyB64          string
	Ports                    ports
	ExtraListeners           []int
	Backends                 []backendSvc
	Churn                    *churnState
	// Filters are the filters benchmark's routes and locations; nil unless it runs.
	Filters *filterData
	// LB are the load-balancing benchmark's Services and routes; nil unless it runs.
	LB *lbData
	// Ingress is the Ingress benchmark's Ingress; nil unless it runs.
	Ingress *ingressData
	// ExtAuth is the external-auth benchmark's Gateway; nil unless it runs.
	ExtAuth *extAuthData
	// HTTP3 serves HTTP/3 on the TLS listeners (Coxswain's ClientTrafficPolicy, Caddy's h3).
	HTTP3 bool
	// NginxAccessLog is the nginx peer's access_log directive's arguments ("" for off): the
	// nginx-log peers (nginxLogPeers).
	NginxAccessLog string
}

func render(name, dst string, d tmplData) error {
	t, err := template.ParseFS(templates, "templates/"+name)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, d); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	// Write then rename, so a watcher never reads half a file.
	tmp := filepath.Join(filepath.Dir(filepath.Dir(dst)), "."+filepath.Base(dst)+".tmp")
	if err := os.WriteFile(tmp, b.Bytes(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}

// writeCert makes the one certificate every TLS listener serves: ECDSA P-256, self-signed, for
// 127.0.0.1 and localhost.
func writeCert(dir string, d *tmplData) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "coxswain bench"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(30 * 24 * time.Hour),
		DNSNames:     []string{"localhost", "*.example.com"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	d.Cert, d.Key, d.Combined = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"), filepath.Join(dir, "combined.pem")
	d.CertB64, d.KeyB64 = base64.StdEncoding.EncodeToString(certPEM), base64.StdEncoding.EncodeToString(keyPEM)
	for path, b := range map[string][]byte{d.Cert: certPEM, d.Key: keyPEM, d.Combined: append(append([]byte{}, certPEM...), keyPEM...)} {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// env is one benchmark session: the scratch directory, the binaries, the processes and the results.
type env struct {
	ctx      context.Context
	dir      string
	bin      binaries
	data     tmplData
	load     *loader
	proxyCPU string
	loadCPU  string
	opts     options
	backend  *proc
	peers    map[string]*peer
	res      *results
}

type binaries struct {
	coxswain, caddy, backend, nginx, haproxy string
}

// coxswainDir renders a Coxswain manifest directory; extra listeners and the churn route are B7's.
func (e *env) coxswainDir(dir string, extra []int, churn *churnState) error {
	return e.coxswainDirPorts(dir, e.data.Ports, extra, churn)
}

func (e *env) coxswainDirPorts(dir string, pt ports, extra []int, churn *churnState) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	d := e.data
	d.Ports = pt
	d.ExtraListeners, d.Churn = extra, churn
	if d.ExtAuth != nil {
		d.ExtAuth = &extAuthData{Port: extAuthPort(pt.CoxswainAdm)}
	}
	d.Backends = []backendSvc{
		{Name: "be", Port: e.data.Ports.Backend},
		{Name: "be-alt", Port: e.data.Ports.BackendAlt},
		{Name: "be-h2c", Port: e.data.Ports.BackendH2C, H2C: true},
	}
	for _, f := range [][2]string{
		{"coxswain-gateway.yaml.tmpl", "gateway.yaml"},
		{"coxswain-backends.yaml.tmpl", "backends.yaml"},
		{"coxswain-routes.yaml.tmpl", "routes.yaml"},
	} {
		if err := render(f[0], filepath.Join(dir, f[1]), d); err != nil {
			return err
		}
	}
	return nil
}
