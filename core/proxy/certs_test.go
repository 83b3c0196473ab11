package proxy

import (
	"testing"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy/internal/testmod"
)

func TestCertCache(t *testing.T) {
	c1, k1 := testmod.Cert(t, "one", "one.example.com")
	c2, k2 := testmod.Cert(t, "two", "two.example.com")
	one := &irv1.Secret{Name: "ns/one", CertificatePem: c1, PrivateKeyPem: k1}
	renamed := &irv1.Secret{Name: "other/copy", CertificatePem: c1, PrivateKeyPem: k1}
	two := &irv1.Secret{Name: "ns/one", CertificatePem: c2, PrivateKeyPem: k2}

	var cache certCache
	a, err := cache.get(newCertKey(one), one)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("same content is parsed once, whatever the secret's name", func(t *testing.T) {
		b, _ := cache.get(newCertKey(renamed), renamed)
		if a != b {
			t.Fatal("re-parsed identical material")
		}
	})
	t.Run("changed content under the same name is parsed again", func(t *testing.T) {
		b, err := cache.get(newCertKey(two), two)
		if err != nil || b == a || b.Leaf.Subject.CommonName != "two" {
			t.Fatalf("got %v, %v", b, err)
		}
	})
	t.Run("retain drops what the serving table does not use", func(t *testing.T) {
		cache.retain(map[certKey]struct{}{newCertKey(two): {}})
		if len(cache.m) != 1 {
			t.Fatalf("%d certificates cached, want 1", len(cache.m))
		}
	})
	t.Run("mismatched key is an error", func(t *testing.T) {
		bad := &irv1.Secret{CertificatePem: c1, PrivateKeyPem: k2}
		if _, err := cache.get(newCertKey(bad), bad); err == nil {
			t.Fatal("accepted a key that does not match the certificate")
		}
	})
}
