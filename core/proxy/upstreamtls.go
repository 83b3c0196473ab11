package proxy

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// upstreamTLS is a cluster's UpstreamTLS compiled once: the CA pool and the client certificate
// parsed, the verification fixed. It is part of the cluster's connPolicy, so connections to one
// address with and without TLS (or under two policies) never share a pool. Instances are interned
// by content (upstreamTLSCache), so a new snapshot with the same TLS keeps the same pointer, the
// same pools and their warm connections.
type upstreamTLS struct {
	cfg *tls.Config
	// alpn is the protocol the endpoint must agree to, "" when any answer (or none) will do.
	alpn string
}

// handshake runs the TLS client handshake on nc within ctx. On failure nc is closed and the error
// says why (unknown authority, name mismatch, ...): the forwarder turns it into a 502 and logs it.
func (u *upstreamTLS) handshake(ctx context.Context, nc net.Conn) (net.Conn, error) {
	tc := tls.Client(nc, u.cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = nc.Close()
		return nil, &errUpstreamTLS{err}
	}
	if p := tc.ConnectionState().NegotiatedProtocol; u.alpn != "" && p != "" && p != u.alpn {
		_ = tc.Close()
		return nil, &errUpstreamTLS{fmt.Errorf("endpoint chose ALPN %q, not %q", p, u.alpn)}
	}
	return tc, nil
}

// dial connects to addr with d and, when u is set, runs the handshake.
func (u *upstreamTLS) dial(ctx context.Context, d *net.Dialer, addr string) (net.Conn, error) {
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil || u == nil {
		return nc, err
	}
	return u.handshake(ctx, nc)
}

// upstreamTLSCache interns compiled upstreamTLS by content. Like certCache it is used only while a
// table is built (under Proxy.mu) and pruned to the serving table's after each swap.
type upstreamTLSCache struct {
	m map[certKey]*upstreamTLS
}

// get compiles (or takes from the cache) c's TLS, nil when c is cleartext. secrets resolves the
// client certificate.
func (uc *upstreamTLSCache) get(c *irv1.Cluster, secrets map[string]*irv1.Secret, certs *certCache) (*upstreamTLS, certKey, error) {
	ut := c.GetTls()
	if ut == nil {
		return nil, certKey{}, nil
	}
	var client *irv1.Secret
	if name := ut.GetClientCertificate(); name != "" {
		var ok bool
		if client, ok = secrets[name]; !ok {
			return nil, certKey{}, fmt.Errorf("client certificate secret %s is not in the snapshot", name)
		}
	}
	key := upstreamTLSKey(c.GetProtocol(), ut, client)
	if u, ok := uc.m[key]; ok {
		return u, key, nil
	}
	u, err := compileUpstreamTLS(c.GetProtocol(), ut, client, certs)
	if err != nil {
		return nil, certKey{}, err
	}
	if uc.m == nil {
		uc.m = map[certKey]*upstreamTLS{}
	}
	uc.m[key] = u
	return u, key, nil
}

func (uc *upstreamTLSCache) retain(keep map[certKey]struct{}) {
	for k := range uc.m {
		if _, ok := keep[k]; !ok {
			delete(uc.m, k)
		}
	}
}

// upstreamTLSKey hashes everything the compiled form depends on: the protocol (ALPN), the TLS
// description and the client certificate's content (a Secret that changes under the same name
// must not keep its old key pair).
func upstreamTLSKey(proto_ irv1.Cluster_Protocol, ut *irv1.UpstreamTLS, client *irv1.Secret) certKey {
	h := sha256.New()
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(ut)
	writeChunk(h, byte(proto_), b)
	if client != nil {
		k := newCertKey(client)
		writeChunk(h, 0xff, k[:])
	}
	var k certKey
	h.Sum(k[:0])
	return k
}

func compileUpstreamTLS(p irv1.Cluster_Protocol, ut *irv1.UpstreamTLS, client *irv1.Secret, certs *certCache) (*upstreamTLS, error) {
	var roots *x509.CertPool
	if ut.GetSystemRoots() {
		sys, err := x509.SystemCertPool()
		if err != nil {
			return nil, fmt.Errorf("system roots: %w", err)
		}
		roots = sys.Clone()
	} else {
		roots = x509.NewCertPool()
	}
	if n, err := addPEMCerts(roots, ut.GetCaPem()); err != nil {
		return nil, err
	} else if n == 0 && !ut.GetSystemRoots() {
		roots = nil // nothing to trust: verify refuses every chain (see verifier)
	}
	v := &verifier{roots: roots, name: ut.GetServerName(), sans: ut.GetSubjectAltNames()}
	cfg := &tls.Config{
		ServerName: ut.GetServerName(),
		MinVersion: tls.VersionTLS12,
		// Verification is verifier's: the spec verifies subjectAltNames instead of the hostname
		// when they are given, which the stdlib's own check cannot express.
		InsecureSkipVerify: true, //nolint:gosec // VerifyConnection below verifies every chain
		VerifyConnection:   v.verify,
	}
	u := &upstreamTLS{cfg: cfg}
	switch p {
	case irv1.Cluster_HTTP1:
		cfg.NextProtos, u.alpn = []string{"http/1.1"}, "http/1.1"
	case irv1.Cluster_H2C:
		cfg.NextProtos, u.alpn = []string{"h2"}, "h2"
	}
	if client != nil {
		cert, err := certs.get(newCertKey(client), client)
		if err != nil {
			return nil, fmt.Errorf("client certificate secret %s: %w", client.GetName(), err)
		}
		cfg.Certificates = []tls.Certificate{*cert}
	}
	return u, nil
}

// addPEMCerts adds every CERTIFICATE block of b to pool, failing on one that does not parse.
func addPEMCerts(pool *x509.CertPool, b []byte) (int, error) {
	n := 0
	for len(b) > 0 {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return n, fmt.Errorf("CA certificate %d: %w", n+1, err)
		}
		pool.AddCert(c)
		n++
	}
	return n, nil
}

// verifier checks an endpoint's chain against roots, then its identity: one of sans when given,
// else name.
type verifier struct {
	roots *x509.CertPool
	name  string
	sans  []*irv1.SubjectAltName
}

var errNoTrustAnchor = errors.New("no CA certificate to verify the endpoint against")

func (v *verifier) verify(cs tls.ConnectionState) error {
	if v.roots == nil {
		return errNoTrustAnchor
	}
	if len(cs.PeerCertificates) == 0 {
		return errors.New("endpoint sent no certificate")
	}
	leaf := cs.PeerCertificates[0]
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	opts := x509.VerifyOptions{Roots: v.roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	if len(v.sans) == 0 {
		opts.DNSName = v.name
	}
	if _, err := leaf.Verify(opts); err != nil {
		return err
	}
	if len(v.sans) == 0 {
		return nil
	}
	for _, san := range v.sans {
		switch san.GetType() {
		case irv1.SubjectAltName_HOSTNAME:
			if leaf.VerifyHostname(san.GetValue()) == nil {
				return nil
			}
		case irv1.SubjectAltName_URI:
			if slices.ContainsFunc(leaf.URIs, func(u *url.URL) bool { return u.String() == san.GetValue() }) {
				return nil
			}
		}
	}
	return fmt.Errorf("endpoint certificate matches none of the %d subjectAltNames", len(v.sans))
}

// dialTLS is the stdlib transport's TLS dialer of p (its "https" URLs), nil for a cleartext policy.
func (p connPolicy) dialTLS() func(ctx context.Context, network, addr string) (net.Conn, error) {
	if p.tls == nil {
		return nil
	}
	return p.dial
}

// errUpstreamTLS marks a failed upstream handshake: logged at WARN with its cluster, since it is a
// configuration fault (wrong CA, name, SAN or client certificate) more than a passing one.
type errUpstreamTLS struct{ err error }

func (e *errUpstreamTLS) Error() string { return "upstream TLS handshake: " + e.err.Error() }
func (e *errUpstreamTLS) Unwrap() error { return e.err }

// logUpstreamError logs an exchange that produced no response.
func logUpstreamError(log *zap.Logger, cluster string, r *http.Request, upstream string, status int, err error) {
	fields := []zap.Field{zap.String("cluster", cluster), zap.String("host", r.Host),
		zap.String("upstream", upstream), zap.Int("status", status), zap.Error(err)}
	var te *errUpstreamTLS
	if errors.As(err, &te) {
		log.Warn("upstream TLS handshake failed", fields...)
		return
	}
	log.Debug("upstream error", fields...)
}
