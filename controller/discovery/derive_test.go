package discovery

import (
	"bytes"
	"testing"
	"time"
)

func TestDeriveSecret(t *testing.T) {
	load := func(certPEM, keyPEM []byte) *CA {
		t.Helper()
		ca, err := LoadCA("cluster.local", certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return ca
	}
	certPEM, keyPEM, err := NewCA("cluster.local", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	otherCert, otherKey, err := NewCA("cluster.local", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	derive := func(ca *CA, label string) []byte {
		t.Helper()
		s, err := ca.DeriveSecret(label)
		if err != nil || len(s) != 32 {
			t.Fatalf("DeriveSecret: %x, %v", s, err)
		}
		return s
	}
	a := derive(load(certPEM, keyPEM), "x")
	if b := derive(load(certPEM, keyPEM), "x"); !bytes.Equal(a, b) {
		t.Error("two loads of one CA (two replicas) derive different secrets")
	}
	if b := derive(load(certPEM, keyPEM), "y"); bytes.Equal(a, b) {
		t.Error("the label does not matter")
	}
	if b := derive(load(otherCert, otherKey), "x"); bytes.Equal(a, b) {
		t.Error("two CAs derive the same secret")
	}
}
