package proxy

import (
	"crypto/tls"
	"errors"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// certCache holds parsed certificates by content hash, so that a snapshot which does not change a
// Secret reuses its parsed chain and key instead of parsing PEM and checking the key again. It is
// used only while building a table (under Proxy.mu) and pruned to the serving table's certificates
// after each swap.
type certCache struct {
	m map[certKey]*tls.Certificate
}

func (c *certCache) get(key certKey, s *irv1.Secret) (*tls.Certificate, error) {
	if cert, ok := c.m[key]; ok {
		return cert, nil
	}
	if len(s.GetCertificatePem()) == 0 || len(s.GetPrivateKeyPem()) == 0 {
		return nil, errors.New("certificate or private key is empty")
	}
	cert, err := tls.X509KeyPair(s.GetCertificatePem(), s.GetPrivateKeyPem())
	if err != nil {
		return nil, err
	}
	if c.m == nil {
		c.m = map[certKey]*tls.Certificate{}
	}
	c.m[key] = &cert
	return &cert, nil
}

// retain drops every certificate the table does not use.
func (c *certCache) retain(keep map[certKey]struct{}) {
	for k := range c.m {
		if _, ok := keep[k]; !ok {
			delete(c.m, k)
		}
	}
}
