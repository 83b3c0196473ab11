package discovery

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"sync"
	"time"

	"github.com/coxswain-labs/coxswain/core/discovery/svid"
)

// caValidity is how long a self-managed CA lives. Rotation is manual (delete the Secret and
// restart the controllers); proxies pick the new bundle up from the ConfigMap file.
const caValidity = 10 * 365 * 24 * time.Hour

// clockSkew backdates every certificate so a peer whose clock runs a little behind accepts it.
const clockSkew = time.Minute

// CA signs the SVIDs of proxies and the controller's serving certificate.
type CA struct {
	trustDomain string
	cert        *x509.Certificate
	key         crypto.Signer
	bundle      []byte // PEM of the CA certificate(s) proxies trust
	pool        *x509.CertPool
	now         func() time.Time

	mu     sync.Mutex
	server *tls.Certificate // the controller's serving certificate, renewed at half life
}

// NewCA makes a self-signed CA for a trust domain.
func NewCA(trustDomain string, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{Organization: []string{"coxswain"}, CommonName: "coxswain discovery CA"},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		URIs:                  []*url.URL{{Scheme: "spiffe", Host: trustDomain}},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

// LoadCA loads a CA from PEM: the first certificate of certPEM is the signing certificate, and
// every certificate in certPEM goes into the trust bundle.
func LoadCA(trustDomain string, certPEM, keyPEM []byte) (*CA, error) {
	if trustDomain == "" {
		return nil, errors.New("no trust domain")
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("CA certificate and key: %w", err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, err
	}
	if !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, errors.New("the CA certificate may not sign certificates (not a CA, or no certSign key usage)")
	}
	signer, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, errors.New("the CA key cannot sign")
	}
	pool, err := svid.ParseBundle(certPEM)
	if err != nil {
		return nil, err
	}
	return &CA{trustDomain: trustDomain, cert: cert, key: signer, bundle: bytes.Clone(certPEM), pool: pool, now: time.Now}, nil
}

// TrustDomain is the trust domain of every SPIFFE ID the CA issues.
func (ca *CA) TrustDomain() string { return ca.trustDomain }

// Bundle is the PEM trust bundle proxies verify the controller with.
func (ca *CA) Bundle() []byte { return ca.bundle }

// Pool is the bundle as a pool, for verifying proxies' client certificates.
func (ca *CA) Pool() *x509.CertPool { return ca.pool }

// IssueSVID signs the public key of a PKCS#10 request (whose signature must verify) into an SVID
// for id, valid for ttl, with the clientAuth key usage only: an SVID cannot serve as the
// controller. It returns the chain, leaf first.
func (ca *CA) IssueSVID(csrDER []byte, id svid.ID, ttl time.Duration) ([][]byte, *x509.Certificate, error) {
	csr, err := x509.ParseCertificateRequest(csrDER)
	if err != nil {
		return nil, nil, fmt.Errorf("certificate request: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, nil, fmt.Errorf("certificate request signature: %w", err)
	}
	now := ca.now()
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{Organization: []string{"coxswain"}, CommonName: id.Subject()},
		NotBefore:   now.Add(-clockSkew),
		NotAfter:    now.Add(ttl),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		URIs:        []*url.URL{id.URL()},
	}
	return ca.sign(tmpl, csr.PublicKey)
}

// serverValidity is the lifetime of the controller's serving certificate; it is renewed at half.
const serverValidity = 24 * time.Hour

// ServerCertificate is the controller's serving certificate (SPIFFE ID svid.ControllerURL, the
// serverAuth key usage, and dnsNames), renewed when half of its life has passed. It is meant for
// tls.Config.GetCertificate.
func (ca *CA) ServerCertificate(dnsNames []string) (*tls.Certificate, error) {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	now := ca.now()
	if c := ca.server; c != nil && now.Before(c.Leaf.NotBefore.Add(c.Leaf.NotAfter.Sub(c.Leaf.NotBefore)/2)) {
		return c, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	var hosts []string
	var ips []net.IP
	for _, n := range dnsNames {
		if ip := net.ParseIP(n); ip != nil {
			ips = append(ips, ip)
		} else {
			hosts = append(hosts, n)
		}
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{Organization: []string{"coxswain"}, CommonName: "coxswain controller"},
		NotBefore:   now.Add(-clockSkew),
		NotAfter:    now.Add(serverValidity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		URIs:        []*url.URL{svid.ControllerURL(ca.trustDomain)},
		DNSNames:    hosts,
		IPAddresses: ips,
	}
	chain, leaf, err := ca.sign(tmpl, key.Public())
	if err != nil {
		return nil, err
	}
	ca.server = &tls.Certificate{Certificate: chain, PrivateKey: key, Leaf: leaf}
	return ca.server, nil
}

func (ca *CA) sign(tmpl *x509.Certificate, pub crypto.PublicKey) ([][]byte, *x509.Certificate, error) {
	serial, err := serialNumber()
	if err != nil {
		return nil, nil, err
	}
	tmpl.SerialNumber = serial
	if tmpl.NotAfter.After(ca.cert.NotAfter) {
		tmpl.NotAfter = ca.cert.NotAfter // never outlive the CA
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, pub, ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("signing: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	chain := [][]byte{der}
	if !bytes.Equal(ca.cert.RawIssuer, ca.cert.RawSubject) {
		chain = append(chain, ca.cert.Raw) // an operator's intermediate CA travels with the leaf
	}
	return chain, leaf, nil
}

func serialNumber() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}
