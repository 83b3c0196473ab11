// Package svid holds what both ends of the discovery protocol need to agree on about identities:
// the SPIFFE IDs of proxies (spiffe://<trust-domain>/ns/<namespace>/sa/<service-account>) and of
// the controller (spiffe://<trust-domain>/coxswain/controller), and how each end checks the other's
// X.509 SVID against the trust bundle. It imports nothing from Kubernetes: the proxy uses it.
package svid

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Audience is the audience of the projected ServiceAccount token a proxy presents to bootstrap.
const Audience = "coxswain-discovery"

// ControllerPath is the path of the controller's SPIFFE ID. Only the controller's serving
// certificate carries it, and only it has the serverAuth key usage.
const ControllerPath = "/coxswain/controller"

// ID is a workload's SPIFFE ID: a ServiceAccount in a trust domain.
type ID struct {
	TrustDomain    string
	Namespace      string
	ServiceAccount string
}

// URL is the ID as a spiffe:// URL, the form certificates carry in their URI SAN.
func (id ID) URL() *url.URL {
	return &url.URL{Scheme: "spiffe", Host: id.TrustDomain, Path: "/ns/" + id.Namespace + "/sa/" + id.ServiceAccount}
}

func (id ID) String() string { return id.URL().String() }

// Subject is "<namespace>/<service-account>", the ID without its trust domain.
func (id ID) Subject() string { return id.Namespace + "/" + id.ServiceAccount }

// ParseID parses a workload SPIFFE ID.
func ParseID(u *url.URL) (ID, error) {
	if u == nil || u.Scheme != "spiffe" || u.Host == "" {
		return ID{}, fmt.Errorf("%v is not a SPIFFE ID", u)
	}
	parts := strings.Split(strings.TrimPrefix(u.Path, "/"), "/")
	if len(parts) != 4 || parts[0] != "ns" || parts[2] != "sa" || parts[1] == "" || parts[3] == "" {
		return ID{}, fmt.Errorf("SPIFFE ID %s does not name a ServiceAccount (/ns/<namespace>/sa/<name>)", u)
	}
	return ID{TrustDomain: u.Host, Namespace: parts[1], ServiceAccount: parts[3]}, nil
}

// ControllerURL is the controller's SPIFFE ID in a trust domain.
func ControllerURL(trustDomain string) *url.URL {
	return &url.URL{Scheme: "spiffe", Host: trustDomain, Path: ControllerPath}
}

// spiffeURI returns the one spiffe:// URI SAN of cert; an SVID has exactly one.
func spiffeURI(cert *x509.Certificate) (*url.URL, error) {
	var found *url.URL
	for _, u := range cert.URIs {
		if u.Scheme != "spiffe" {
			continue
		}
		if found != nil {
			return nil, errors.New("certificate carries more than one SPIFFE ID")
		}
		found = u
	}
	if found == nil {
		return nil, errors.New("certificate carries no SPIFFE ID")
	}
	return found, nil
}

// verify checks that the chain (leaf first) leads to roots, with usage, at now.
func verify(chain []*x509.Certificate, roots *x509.CertPool, usage x509.ExtKeyUsage, now time.Time) error {
	if len(chain) == 0 {
		return errors.New("no certificate presented")
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	_, err := chain[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}, CurrentTime: now})
	return err
}

// VerifyProxy checks a proxy's client certificate chain against roots and returns its ID.
func VerifyProxy(chain []*x509.Certificate, roots *x509.CertPool, now time.Time) (ID, error) {
	if err := verify(chain, roots, x509.ExtKeyUsageClientAuth, now); err != nil {
		return ID{}, err
	}
	u, err := spiffeURI(chain[0])
	if err != nil {
		return ID{}, err
	}
	return ParseID(u)
}

// VerifyController checks the controller's serving certificate chain against roots: it must
// chain to the bundle, allow serverAuth, and carry the controller's SPIFFE ID; in trustDomain,
// unless that is empty (a proxy bootstrapping does not know its trust domain yet). Host names are
// not checked: proxies reach the controller through Service addresses and pod IPs alike, and the
// SPIFFE ID is what names it.
func VerifyController(chain []*x509.Certificate, roots *x509.CertPool, trustDomain string, now time.Time) error {
	if err := verify(chain, roots, x509.ExtKeyUsageServerAuth, now); err != nil {
		return err
	}
	u, err := spiffeURI(chain[0])
	if err != nil {
		return err
	}
	if u.Path != ControllerPath || (trustDomain != "" && u.Host != trustDomain) {
		return fmt.Errorf("server identity %s is not the controller of trust domain %q", u, trustDomain)
	}
	return nil
}

// ParseBundle parses PEM CA certificates into a pool.
func ParseBundle(pem []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("trust bundle holds no PEM certificate")
	}
	return pool, nil
}
