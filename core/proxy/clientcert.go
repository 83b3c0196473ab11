package proxy

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"net/url"
	"runtime"
	"strings"
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
	// certHeader is the canonical header for the verified certificate itself (PEM, URL-encoded);
	// "" for none.
	certHeader string
	// depth is the most intermediates a verified chain may hold (IR verify_depth); 0: no limit.
	depth  int
	config *tls.Config
	// checked caches, for fallback mode with a subject or certificate header, the headers of each
	// connection's certificate (empty when it did not verify), keyed by the connection's leaf certificate: the
	// fallback handshake does not verify, and a chain verification per request would cost more
	// than the request. An entry goes when its certificate is collected with its connection.
	checked sync.Map // weak.Pointer[x509.Certificate] → clientHeaders
}

// clientHeaders are what admitClient sets from a verified chain.
type clientHeaders struct{ subject, cert string }

// requires reports whether the Server asks for client certificates at all (a validation with no
// CA only strips the subject header).
func (cv *clientValidation) requires() bool { return cv != nil && cv.pool != nil }

// newClientValidation compiles v for the Server with certificates certs.
func newClientValidation(v *irv1.ClientValidation, certs []*tls.Certificate) (*clientValidation, error) {
	cv := &clientValidation{fallback: v.GetMode() == irv1.ClientValidation_ALLOW_INSECURE_FALLBACK}
	if h := v.GetSubjectHeader(); h != "" {
		cv.header = textproto.CanonicalMIMEHeaderKey(h)
	}
	if h := v.GetCertificateHeader(); h != "" {
		cv.certHeader = textproto.CanonicalMIMEHeaderKey(h)
	}
	cv.depth = int(min(v.GetVerifyDepth(), 1<<16))
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
		// crypto/tls has no depth limit: a chain it verified is refused here when every path to
		// the CA is longer than allowed, the same handshake failure as an unverified one.
		VerifyPeerCertificate: func(_ [][]byte, chains [][]*x509.Certificate) error {
			if cv.fallback || cv.depth == 0 || len(cv.withinDepth(chains)) > 0 {
				return nil
			}
			return fmt.Errorf("client certificate chain has more than %d intermediate certificates", cv.depth)
		},
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
	if cv.certHeader != "" {
		r.Header.Del(cv.certHeader)
	}
	if !cv.requires() {
		return true
	}
	if hs := ls.handshakeServer(r.TLS.ServerName); hs == nil || hs.cv != cv {
		return false
	}
	if cv.fallback {
		if (cv.header != "" || cv.certHeader != "") && len(r.TLS.PeerCertificates) > 0 {
			cv.setHeaders(r, cv.fallbackHeaders(r.TLS.PeerCertificates))
		}
		return true
	}
	chains := cv.withinDepth(r.TLS.VerifiedChains)
	if !cv.verifiedHere(chains) {
		return false
	}
	if cv.header != "" || cv.certHeader != "" {
		cv.setHeaders(r, cv.headersOf(chains[0][0]))
	}
	return true
}

// setHeaders sets the headers of a verified certificate (none when h is empty).
func (cv *clientValidation) setHeaders(r *http.Request, h clientHeaders) {
	if cv.header != "" && h.subject != "" {
		r.Header[cv.header] = []string{h.subject}
	}
	if cv.certHeader != "" && h.cert != "" {
		r.Header[cv.certHeader] = []string{h.cert}
	}
}

// headersOf is what the headers carry of verified certificate leaf.
func (cv *clientValidation) headersOf(leaf *x509.Certificate) clientHeaders {
	h := clientHeaders{subject: leaf.Subject.String()}
	if cv.certHeader != "" {
		h.cert = escapedPEM(leaf)
	}
	return h
}

// escapedPEM is leaf as PEM, URL-encoded the way nginx's $ssl_client_escaped_cert is (every byte
// but letters, digits and "-._~" as %XX; a space as %20), so that upstreams written for
// ingress-nginx's ssl-client-cert header read it unchanged.
func escapedPEM(leaf *x509.Certificate) string {
	p := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leaf.Raw})
	// QueryEscape writes a space as "+"; a literal "+" is already %2B, so the swap is exact.
	return strings.ReplaceAll(url.QueryEscape(string(p)), "+", "%20")
}

// withinDepth are the chains of at most depth intermediates (all of them with no limit). A Go
// chain runs from the leaf to the pool's certificate, so its intermediates are len-2.
func (cv *clientValidation) withinDepth(chains [][]*x509.Certificate) [][]*x509.Certificate {
	if cv.depth == 0 {
		return chains
	}
	out := chains[:0:0]
	for _, ch := range chains {
		if len(ch)-2 <= cv.depth {
			out = append(out, ch)
		}
	}
	return out
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

// fallbackHeaders are the verified headers of a fallback connection's certificates, empty when
// they do not verify against the bundle (within the depth); verified once per connection.
func (cv *clientValidation) fallbackHeaders(peer []*x509.Certificate) clientHeaders {
	leaf := peer[0]
	key := weak.Make(leaf)
	if h, ok := cv.checked.Load(key); ok {
		return h.(clientHeaders)
	}
	var h clientHeaders
	if chains := cv.withinDepth(cv.verify(peer)); cv.verifiedHere(chains) {
		h = cv.headersOf(chains[0][0])
	}
	if _, loaded := cv.checked.LoadOrStore(key, h); !loaded {
		runtime.AddCleanup(leaf, func(k weak.Pointer[x509.Certificate]) { cv.checked.Delete(k) }, key)
	}
	return h
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
