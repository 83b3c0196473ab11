package acme

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"sync"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/mholt/acmez/v3"
	"github.com/mholt/acmez/v3/acme"

	"github.com/coxswain-labs/coxswain/controller/translator"
)

// issuer is a certmagic.Issuer for one ACME account (translator.ACMEIssuer). It is certmagic's
// own ACMEIssuer minus the solvers: that one answers challenges on sockets of its own, and here
// only the proxies hold the ports.
type issuer struct {
	spec    *translator.ACMEIssuer
	m       *Manager
	dns     acmez.Solver // DNS-01, with a provider module; nil without
	http    *http.Client
	mu      sync.Mutex
	account *acme.Account // registered, once known
}

var _ certmagic.Issuer = (*issuer)(nil)

func newIssuer(m *Manager, spec *translator.ACMEIssuer, dns acmez.Solver) (*issuer, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if len(spec.CAPEM) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(spec.CAPEM) {
			return nil, errors.New("the CA bundle holds no certificate")
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &issuer{spec: spec, m: m, dns: dns, http: &http.Client{Transport: tr, Timeout: 30 * time.Second}}, nil
}

// IssuerKey implements certmagic.Issuer: certificates of one account share a storage prefix.
func (i *issuer) IssuerKey() string { return "coxswain-" + i.spec.Key() }

func (i *issuer) client() *acmez.Client {
	c := &acmez.Client{
		Client:           &acme.Client{Directory: i.spec.Directory, HTTPClient: i.http, UserAgent: "coxswain"},
		ChallengeSolvers: map[string]acmez.Solver{},
	}
	if i.dns != nil {
		c.ChallengeSolvers[acme.ChallengeTypeDNS01] = i.dns
	}
	if i.spec.Challenge != "tls-alpn-01" {
		c.ChallengeSolvers[acme.ChallengeTypeHTTP01] = &solver{m: i.m, typ: acme.ChallengeTypeHTTP01}
	}
	if i.spec.Challenge != "http-01" {
		c.ChallengeSolvers[acme.ChallengeTypeTLSALPN01] = &solver{m: i.m, typ: acme.ChallengeTypeTLSALPN01}
	}
	return c
}

// Issue implements certmagic.Issuer. certmagic calls it holding the storage lock of the name.
func (i *issuer) Issue(ctx context.Context, csr *x509.CertificateRequest) (*certmagic.IssuedCertificate, error) {
	c := i.client()
	acct, err := i.ensureAccount(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("ACME account at %s: %w", i.spec.Directory, err)
	}
	params, err := acmez.OrderParametersFromCSR(acct, csr)
	if err != nil {
		return nil, err
	}
	certs, err := c.ObtainCertificate(ctx, params)
	if err != nil {
		return nil, err
	}
	if len(certs) == 0 {
		return nil, errors.New("the ACME server returned no certificate")
	}
	return &certmagic.IssuedCertificate{Certificate: certs[0].ChainPEM}, nil
}

// ensureAccount registers the account, or finds it again: its key is kept in the storage, and a
// newAccount request with a known key returns the existing account (RFC 8555, section 7.3.1).
func (i *issuer) ensureAccount(ctx context.Context, c *acmez.Client) (acme.Account, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.account != nil {
		return *i.account, nil
	}
	key, err := i.accountKey(ctx)
	if err != nil {
		return acme.Account{}, err
	}
	acct := acme.Account{TermsOfServiceAgreed: true, PrivateKey: key}
	if i.spec.Email != "" {
		acct.Contact = []string{"mailto:" + i.spec.Email}
	}
	if i.spec.EABKeyID != "" {
		if err := acct.SetExternalAccountBinding(ctx, c.Client, acme.EAB{KeyID: i.spec.EABKeyID, MACKey: i.spec.EABHMAC}); err != nil {
			return acme.Account{}, fmt.Errorf("external account binding: %w", err)
		}
	}
	acct, err = c.NewAccount(ctx, acct)
	if err != nil {
		return acme.Account{}, err
	}
	i.account = &acct
	return acct, nil
}

// accountKey loads the account's key from the storage, or makes and stores one. Made under the
// storage's lock, so two controllers never register two accounts for one issuer.
func (i *issuer) accountKey(ctx context.Context) (crypto.Signer, error) {
	st := i.m.opts.Storage
	name := "coxswain/acme/" + i.spec.Key() + "/account.key"
	lock := "account_" + i.spec.Key()
	if err := st.Lock(ctx, lock); err != nil {
		return nil, err
	}
	defer func() { _ = st.Unlock(context.WithoutCancel(ctx), lock) }()
	b, err := st.Load(ctx, name)
	switch {
	case err == nil:
		block, _ := pem.Decode(b)
		if block == nil {
			return nil, fmt.Errorf("%s holds no PEM key", name)
		}
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		s, ok := k.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("%s: not a signing key", name)
		}
		return s, nil
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, err
	}
	if err := st.Store(ctx, name, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})); err != nil {
		return nil, err
	}
	return k, nil
}
