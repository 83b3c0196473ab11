package proxy

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"runtime"
	"sync"
	"weak"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// clientValidation is a Server's client certificate check (IR ClientValidation), compiled once
// per table. The handshake asks for a certificate with the Server's own tls.Config (config); each
// request is checked again against the Server its Host selects (admit), because a connection's
// handshake happened for the Server its SNI chose, maybe under an older table.
type clientValidation struct {
	pool *x509.CertPool
	// roots are the DER bytes of the bundle's certificates: a verified chain ends in one of them
	// (Go puts the pool's certificate last), so a request can tell that its connection was
	// verified against this bundle and not the one of an older table or of another Server.
	roots    map[string]struct{}
	fallback bool   // ALLOW_INSECURE_FALLBACK
	header   string // canonical subject header; "" for none
	config   *tls.Config
	// checked caches, for fallback mode with a subject header, the subject of each connection's
	// certificate ("" when it did not verify), keyed by the connection's leaf certificate: the
	// fallback handshake does not verify, and a chain verification per request would cost more
	// than the request. An entry goes when its certificate is collected with its connection.
	checked sync.Map // weak.Pointer[x509.Certificate] → string
}

// requires reports whether the Server asks for client certificates at all (a validation with no
// CA only strips the subject header).
func (cv *clientValidation) requires() bool { return cv != nil && cv.pool != nil }

// newClientValidation compiles v for the Server with certificates certs.
func newClientValidation(v *irv1.ClientValidation, certs []*tls.Certificate) (*clientValidation, error) {
	cv := &clientValidation{fallback: v.GetMode() == irv1.ClientValidation_ALLOW_INSECURE_FALLBACK}
	if h := v.GetSubjectHeader(); h != "" {
		cv.header = textproto.CanonicalMIMEHeaderKey(h)
	}
	if len(v.GetCaPem()) == 0 {
		return cv, nil
	}
	cv.pool, cv.roots = x509.NewCertPool(), map[string]struct{}{}
	rest := v.GetCaPem()
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("client CA bundle: %w", err)
		}
		cv.pool.AddCert(c)
		cv.roots[string(c.Raw)] = struct{}{}
	}
	if len(cv.roots) == 0 {
		return nil, errors.New("client CA bundle holds no PEM certificate")
	}
	auth := tls.RequireAndVerifyClientCert
	if cv.fallback {
		// Any certificate, or none, completes the handshake; admitClient verifies it (once per
		// connection) only when the subject header needs to know.
		auth = tls.RequestClientCert
	}
	cv.config = &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Only listener.https terminates with client validation, and it speaks both.
		NextProtos: []string{"h2", "http/1.1"},
		ClientAuth: auth,
		ClientCAs:  cv.pool,
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			return pickCertificate(hello, certs)
		},
	}
	// Session resumption needs nothing more: crypto/tls resumes a session here only if it carries
	// a chain that verifies against this config's ClientCAs (and a certificate at all when one is
	// required), whichever Server issued the ticket.
	return cv, nil
}

// pickCertificate takes the first of a Server's certificates the client supports.
func pickCertificate(hello *tls.ClientHelloInfo, certs []*tls.Certificate) (*tls.Certificate, error) {
	if len(certs) == 0 {
		return nil, ErrNoCertificate
	}
	if len(certs) > 1 {
		for _, c := range certs {
			if hello.SupportsCertificate(c) == nil {
				return c, nil
			}
		}
	}
	return certs[0], nil
}

// ConfigForClient is the tls.Config for a ClientHello when the Server it selects (as Certificate
// chooses) validates client certificates; nil, nil otherwise (the listener's own config serves).
func (ls *ListenerState) ConfigForClient(hello *tls.ClientHelloInfo) (*tls.Config, error) {
	sc := ls.handshakeServer(hello.ServerName)
	if sc == nil || !sc.cv.requires() {
		return nil, nil
	}
	return sc.cv.config, nil
}

// handshakeServer is the Server whose certificates a handshake with this SNI gets.
func (ls *ListenerState) handshakeServer(sni string) *serverCerts {
	if sc, ok := ls.certs.lookup(normalizeHost(sni)); ok {
		return sc
	}
	return ls.firstTLS
}

// admitClient checks a TLS request against the client validation of srv, the Server its Host
// selected, and sets or strips the subject header. It returns false when the request must not
// reach a route: its connection was not set up by srv's validation (an SNI of another Server,
// none, or an older table's bundle), which 421 sends to a new connection.
func (ls *ListenerState) admitClient(srv *server, r *http.Request) bool {
	cv := srv.cv
	if cv == nil {
		return true
	}
	if cv.header != "" {
		r.Header.Del(cv.header)
	}
	if !cv.requires() {
		return true
	}
	if hs := ls.handshakeServer(r.TLS.ServerName); hs == nil || hs.cv != cv {
		return false
	}
	if cv.fallback {
		if cv.header != "" && len(r.TLS.PeerCertificates) > 0 {
			if s := cv.fallbackSubject(r.TLS.PeerCertificates); s != "" {
				r.Header[cv.header] = []string{s}
			}
		}
		return true
	}
	chains := r.TLS.VerifiedChains
	if !cv.verifiedHere(chains) {
		return false
	}
	if cv.header != "" {
		r.Header[cv.header] = []string{chains[0][0].Subject.String()}
	}
	return true
}

// verifiedHere reports whether one of chains ends in this bundle.
func (cv *clientValidation) verifiedHere(chains [][]*x509.Certificate) bool {
	for _, ch := range chains {
		if len(ch) == 0 {
			continue
		}
		if _, ok := cv.roots[string(ch[len(ch)-1].Raw)]; ok {
			return true
		}
	}
	return false
}

// fallbackSubject is the verified subject of a fallback connection's certificates, "" when they
// do not verify against the bundle; verified once per connection.
func (cv *clientValidation) fallbackSubject(peer []*x509.Certificate) string {
	leaf := peer[0]
	key := weak.Make(leaf)
	if s, ok := cv.checked.Load(key); ok {
		return s.(string)
	}
	subject := ""
	if chains := cv.verify(peer); cv.verifiedHere(chains) {
		subject = chains[0][0].Subject.String()
	}
	if _, loaded := cv.checked.LoadOrStore(key, subject); !loaded {
		runtime.AddCleanup(leaf, func(k weak.Pointer[x509.Certificate]) { cv.checked.Delete(k) }, key)
	}
	return subject
}

// verify checks a fallback connection's certificates as the handshake of a validating Server
// would have.
func (cv *clientValidation) verify(peer []*x509.Certificate) [][]*x509.Certificate {
	opts := x509.VerifyOptions{Roots: cv.pool, Intermediates: x509.NewCertPool(),
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	for _, c := range peer[1:] {
		opts.Intermediates.AddCert(c)
	}
	chains, err := peer[0].Verify(opts)
	if err != nil {
		return nil
	}
	return chains
}
