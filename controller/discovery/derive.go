package discovery

import (
	"crypto/hkdf"
	"crypto/sha256"
	"crypto/x509"
	"fmt"
)

// DeriveSecret derives a 32-byte secret for purpose label from the CA's private key (HKDF-SHA256
// over its PKCS #8 encoding). Every replica loads the same CA (the self-managed Secret, or the
// operator's files), so every replica and every restart derives the same secret, while the
// secret reveals nothing of the key. The controller keys session persistence cookies with it.
func (ca *CA) DeriveSecret(label string) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(ca.key)
	if err != nil {
		return nil, fmt.Errorf("encoding the CA key: %w", err)
	}
	return hkdf.Key(sha256.New, der, nil, label, 32)
}
