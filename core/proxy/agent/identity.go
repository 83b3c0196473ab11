package agent

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/coxswain-labs/coxswain/core/discovery/svid"
	discv1 "github.com/coxswain-labs/coxswain/core/discovery/v1"
)

// identity is the proxy's current SVID.
type identity struct {
	mu       sync.Mutex
	cert     *tls.Certificate
	id       svid.ID
	obtained time.Time
}

func (i *identity) current() (*tls.Certificate, svid.ID) {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.cert, i.id
}

func (i *identity) set(c *tls.Certificate, id svid.ID) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.cert, i.id, i.obtained = c, id, time.Now()
}

// renewAt is when the SVID should be replaced: half-way between when it was obtained and when it
// expires, as SPIFFE agents do, so a failed renewal has the other half to be retried. (NotBefore
// is backdated for clock skew, so it is not where the useful life starts.)
func (i *identity) renewAt() time.Time {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.obtained.Add(i.cert.Leaf.NotAfter.Sub(i.obtained) / 2)
}

// usable reports whether c can open a stream now (it is not about to expire).
func usable(c *tls.Certificate, now time.Time) bool {
	return c != nil && now.Add(10*time.Second).Before(c.Leaf.NotAfter)
}

// roots reads the trust bundle file; it is read at every connection, so a CA rotated through the
// ConfigMap is picked up without a restart.
func (a *Agent) roots() (*x509.CertPool, error) {
	b, err := os.ReadFile(a.opts.TrustBundleFile)
	if err != nil {
		return nil, fmt.Errorf("trust bundle: %w", err)
	}
	pool, err := svid.ParseBundle(b)
	if err != nil {
		return nil, fmt.Errorf("trust bundle %s: %w", a.opts.TrustBundleFile, err)
	}
	return pool, nil
}

// tlsConfig is the client side of the connection to the controller: the server must present the
// controller's SVID (trustDomain when known), and the proxy presents its own SVID when it has one.
func (a *Agent) tlsConfig(roots *x509.CertPool, trustDomain string, withSVID bool) *tls.Config {
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS13,
		// Host names are not what names the controller: its SPIFFE ID is, checked below against
		// the trust bundle (chain, serverAuth usage, ID). Proxies reach the controller through
		// Service names and pod IPs alike.
		InsecureSkipVerify: true, //nolint:gosec // replaced by VerifyPeerCertificate
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			chain := make([]*x509.Certificate, 0, len(raw))
			for _, der := range raw {
				c, err := x509.ParseCertificate(der)
				if err != nil {
					return err
				}
				chain = append(chain, c)
			}
			return svid.VerifyController(chain, roots, trustDomain, time.Now())
		},
	}
	if withSVID {
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			c, _ := a.id.current()
			if c == nil {
				return &tls.Certificate{}, nil
			}
			return c, nil
		}
	}
	return cfg
}

// bootstrap exchanges the ServiceAccount token for a fresh SVID at addr. The key pair is made
// here and its private half never leaves the process.
func (a *Agent) bootstrap(ctx context.Context, addr string) error {
	raw, err := os.ReadFile(a.opts.TokenFile)
	if err != nil {
		return fmt.Errorf("token: %w", err)
	}
	token := strings.TrimSpace(string(raw))
	if token == "" {
		return fmt.Errorf("token file %s is empty", a.opts.TokenFile)
	}
	roots, err := a.roots()
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		return err
	}
	conn, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(credentials.NewTLS(a.tlsConfig(roots, "", false))))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	resp, err := discv1.NewBootstrapServiceClient(conn).IssueCertificate(ctx, &discv1.IssueCertificateRequest{Token: token, Csr: csr})
	if err != nil {
		return fmt.Errorf("bootstrap at %s: %w", addr, err)
	}
	chain := make([]*x509.Certificate, 0, len(resp.GetCertificateChain()))
	for _, der := range resp.GetCertificateChain() {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return fmt.Errorf("issued certificate: %w", err)
		}
		chain = append(chain, c)
	}
	id, err := svid.VerifyProxy(chain, roots, time.Now())
	if err != nil {
		return fmt.Errorf("issued certificate does not verify against the trust bundle: %w", err)
	}
	if len(chain) == 0 || !chain[0].PublicKey.(*ecdsa.PublicKey).Equal(&key.PublicKey) {
		return errors.New("issued certificate is not for the key requested")
	}
	cert := &tls.Certificate{Certificate: resp.GetCertificateChain(), PrivateKey: key, Leaf: chain[0]}
	a.id.set(cert, id)
	a.metrics.svidExpiry.Set(float64(chain[0].NotAfter.Unix()))
	a.log.Info("SVID issued", zap.String("spiffeID", id.String()), zap.Time("notAfter", chain[0].NotAfter))
	return nil
}

// renew keeps the SVID fresh: it bootstraps again at half of the current SVID's life, retrying
// with backoff on failure, until ctx is done. Open streams keep their TLS session; the next
// connection presents the new SVID (the controller ends a stream when its SVID expires).
func (a *Agent) renew(ctx context.Context) {
	failures := 0
	for {
		cert, _ := a.id.current()
		wait := time.Second
		if cert != nil && failures == 0 {
			wait = time.Until(a.id.renewAt())
		} else if failures > 0 {
			wait = backoff(failures, time.Second, 30*time.Second)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		if cert == nil {
			continue // the connect loop bootstraps the first one
		}
		if err := a.bootstrap(ctx, a.anyAddress(ctx)); err != nil {
			failures++
			a.log.Warn("renewing the SVID", zap.Error(err), zap.Time("notAfter", cert.Leaf.NotAfter))
			continue
		}
		failures = 0
	}
}
