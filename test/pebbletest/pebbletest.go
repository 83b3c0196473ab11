// Package pebbletest runs Pebble, Let's Encrypt's ACME test server, on loopback for the automatic
// certificate tests, with a DNS responder of its own that resolves every name to 127.0.0.1, so
// that Pebble validates challenges against the proxy under test on the ports the test gives it.
//
// The pebble binary is found through $COXSWAIN_PEBBLE, then .tools/bin/pebble (what `make test`
// installs, pinned in the Makefile), then $PATH. Without it the test is skipped with a message;
// under COXSWAIN_REQUIRE_PEBBLE=1 (CI) it fails instead.
package pebbletest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// Options configure one Pebble.
type Options struct {
	// HTTPPort and TLSPort are where Pebble validates HTTP-01 and TLS-ALPN-01 (on 127.0.0.1).
	HTTPPort, TLSPort int
	// Validity is the lifetime of the certificates it issues (90 days when zero).
	Validity time.Duration
	// Blocklist are domains Pebble refuses to issue for (rejectedIdentifier).
	Blocklist []string
	// EAB requires an external account binding; the keys are EABKeyID/EABHMAC.
	EAB bool
	// AlwaysValid makes Pebble take every challenge as passed without validating it
	// (PEBBLE_VA_ALWAYS_VALID), for tests of the account and order flow alone.
	AlwaysValid bool
	// Address is what every name resolves to (127.0.0.1 when empty): where the proxy under test
	// listens.
	Address string
}

// EABKeyID and EABHMAC are the external account Pebble knows when Options.EAB is set.
const (
	EABKeyID = "kid-1"
	EABHMAC  = "zWNDZM6eQGHWpSRTPal5eIUYFTu7EajVIoguysqZ9wG44nMEtx3MUAsUDkMTQ12W"
)

// Server is one running Pebble.
type Server struct {
	// Directory is the ACME directory URL; CAPEM the CA of its own TLS certificate (what a
	// Gateway's acme-ca-configmap holds).
	Directory string
	CAPEM     []byte

	mgmt   string
	client *http.Client
	log    *syncBuffer
}

// Bin returns the pebble binary, skipping (or failing, under COXSWAIN_REQUIRE_PEBBLE) without one.
func Bin(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("COXSWAIN_PEBBLE"); p != "" {
		return p
	}
	if dir, err := os.Getwd(); err == nil {
		for ; dir != filepath.Dir(dir); dir = filepath.Dir(dir) {
			p := filepath.Join(dir, ".tools", "bin", "pebble")
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	p, err := exec.LookPath("pebble")
	if err != nil {
		if os.Getenv("COXSWAIN_REQUIRE_PEBBLE") != "" {
			t.Fatalf("pebble not found (.tools/bin/pebble, $PATH), and COXSWAIN_REQUIRE_PEBBLE is set: %v", err)
		}
		t.Skip("pebble is not installed (make tools installs it into .tools/bin): skipping the ACME test")
	}
	return p
}

// Start runs Pebble and its DNS responder until t ends, and waits until the directory answers.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	bin := Bin(t)
	dir := t.TempDir()
	caPEM, certPEM, keyPEM := serverCert(t)
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ip := net.IPv4(127, 0, 0, 1)
	if o.Address != "" {
		ip = net.ParseIP(o.Address)
	}
	// The DNS responder first: it holds its port, so the two picked for Pebble below cannot be
	// it (a port freeAddr picked and let go is free for the next listener on port 0 too).
	dnsAddr := startDNS(t, ip)
	listen, mgmt := freeAddr(t), freeAddr(t)
	validity := int64(o.Validity / time.Second)
	if validity == 0 {
		validity = 7776000
	}
	cfg := map[string]any{"pebble": map[string]any{
		"listenAddress": listen, "managementListenAddress": mgmt,
		"certificate": write("cert.pem", certPEM), "privateKey": write("key.pem", keyPEM),
		"httpPort": o.HTTPPort, "tlsPort": o.TLSPort, "ocspResponderURL": "",
		"externalAccountBindingRequired": o.EAB, "domainBlocklist": o.Blocklist,
		"retryAfter": map[string]int{"authz": 1, "order": 1}, "keyAlgorithm": "ecdsa",
		"profiles": map[string]any{"default": map[string]any{"description": "test", "validityPeriod": validity}},
	}}
	if o.EAB {
		cfg["pebble"].(map[string]any)["externalAccountMACKeys"] = map[string]string{EABKeyID: EABHMAC}
	}
	b, _ := json.Marshal(cfg)
	cfgPath := write("pebble.json", b)
	s := &Server{Directory: "https://" + listen + "/dir", CAPEM: caPEM, mgmt: mgmt, log: &syncBuffer{}}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	s.client = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	cmd := exec.Command(bin, "-config", cfgPath, "-dnsserver", dnsAddr)
	// No random sleep before validations, no injected bad nonces, no reuse of authorizations:
	// every order validates, at once.
	cmd.Env = append(os.Environ(), "PEBBLE_VA_NOSLEEP=1", "PEBBLE_WFE_NONCEREJECT=0", "PEBBLE_AUTHZREUSE=0")
	if o.AlwaysValid {
		cmd.Env = append(cmd.Env, "PEBBLE_VA_ALWAYS_VALID=1")
	}
	cmd.Stdout, cmd.Stderr = s.log, s.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("pebble log:\n%s", s.log)
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := s.client.Get(s.Directory)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		select {
		case <-done:
			t.Fatalf("pebble exited: %s", s.log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("pebble's directory does not answer: %v\n%s", err, s.log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Roots is the pool of Pebble's issuing root (it makes a new one at every start).
func (s *Server) Roots(t testing.TB) *x509.CertPool {
	t.Helper()
	resp, err := s.client.Get("https://" + s.mgmt + "/roots/0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		t.Fatalf("pebble /roots/0: %s", b)
	}
	return pool
}

// Issued counts the certificates Pebble has issued.
func (s *Server) Issued() int { return strings.Count(s.log.String(), "Issued certificate serial") }

// Log is what Pebble wrote so far.
func (s *Server) Log() string { return s.log.String() }

// startDNS answers A ip for every name (and no AAAA), on a loopback port over TCP (what
// Pebble's resolver speaks) and UDP.
func startDNS(t testing.TB, ip net.IP) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenPacket("udp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		for _, q := range r.Question {
			if q.Qtype == dns.TypeA {
				m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 1},
					A: ip})
			}
		}
		_ = w.WriteMsg(m)
	})
	for _, srv := range []*dns.Server{{Listener: ln, Handler: h}, {PacketConn: pc, Handler: h}} {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		go func() { _ = srv.ActivateAndServe() }()
		<-started
		t.Cleanup(func() { _ = srv.Shutdown() })
	}
	return ln.Addr().String()
}

// serverCert makes a CA and a certificate for 127.0.0.1 and localhost signed by it.
func serverCert(t testing.TB) (caPEM, certPEM, keyPEM []byte) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "pebbletest CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalPKCS8PrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
}

// FreePort is a loopback TCP port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	_, p, _ := net.SplitHostPort(freeAddr(t))
	n, _ := strconv.Atoi(p)
	return n
}

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().String()
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
