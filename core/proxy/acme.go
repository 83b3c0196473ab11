package proxy

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"strings"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// ACMETLSALPNProto is the ALPN protocol of the TLS-ALPN-01 challenge (RFC 8737): a handshake
// offering it is a validation, never a client.
const ACMETLSALPNProto = "acme-tls/1"

// acmeChallengePath is where HTTP-01 validations ask (RFC 8555, section 8.3).
const acmeChallengePath = "/.well-known/acme-challenge/"

// acmeChallenges are the ACME validations a table answers, compiled from Snapshot.acme_challenges.
// The proxy only answers what the snapshot carries: the ACME client is the controller (or
// `serve`), so a proxy never talks to an ACME server. nil when the snapshot has none, which keeps
// the request path at one nil check.
type acmeChallenges struct {
	http map[acmeHTTPKey]string      // key authorization by (hostname, token)
	tls  map[string]*tls.Certificate // TLS-ALPN-01 certificate by hostname
}

type acmeHTTPKey struct{ host, token string }

func compileACME(chs []*irv1.ACMEChallenge) (*acmeChallenges, error) {
	if len(chs) == 0 {
		return nil, nil
	}
	a := &acmeChallenges{http: map[acmeHTTPKey]string{}, tls: map[string]*tls.Certificate{}}
	for _, c := range chs {
		host := strings.ToLower(c.GetHostname())
		switch c.GetType() {
		case irv1.ACMEChallenge_HTTP_01:
			if c.GetToken() == "" || strings.Contains(c.GetToken(), "/") {
				return nil, fmt.Errorf("acme challenge for %s: invalid token %q", host, c.GetToken())
			}
			a.http[acmeHTTPKey{host, c.GetToken()}] = c.GetKeyAuthorization()
		case irv1.ACMEChallenge_TLS_ALPN_01:
			cert, err := tls.X509KeyPair(c.GetCertificatePem(), c.GetPrivateKeyPem())
			if err != nil {
				return nil, fmt.Errorf("acme challenge for %s: %w", host, err)
			}
			a.tls[host] = &cert
		default:
			return nil, fmt.Errorf("acme challenge for %s: unknown type %v", host, c.GetType())
		}
	}
	return a, nil
}

// serveHTTP01 answers r if it is an HTTP-01 validation the table knows; it reports whether it did.
// Only the exact (hostname, token) pairs are answered: every other request under the path goes
// to the routes as usual.
func (a *acmeChallenges) serveHTTP01(w http.ResponseWriter, r *http.Request) bool {
	token, ok := strings.CutPrefix(r.URL.Path, acmeChallengePath)
	if !ok || len(a.http) == 0 {
		return false
	}
	ka, ok := a.http[acmeHTTPKey{normalizeHost(r.Host), token}]
	if !ok {
		return false
	}
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("Content-Length", fmt.Sprint(len(ka)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write([]byte(ka))
	}
	return true
}

// ACMEConfigForClient returns the TLS config answering hello when it is a TLS-ALPN-01 validation
// the current table knows (only "acme-tls/1" offered, for a hostname with a challenge), else nil.
// The listener closes such a connection once the handshake is done.
func (ls *ListenerState) ACMEConfigForClient(hello *tls.ClientHelloInfo) *tls.Config {
	a := ls.table.acme
	if a == nil || len(a.tls) == 0 || len(hello.SupportedProtos) != 1 || hello.SupportedProtos[0] != ACMETLSALPNProto {
		return nil
	}
	cert, ok := a.tls[normalizeHost(hello.ServerName)]
	if !ok {
		return nil
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*cert}, NextProtos: []string{ACMETLSALPNProto}}
}
