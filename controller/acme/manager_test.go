package acme_test

import (
	"context"
	"crypto/tls"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"

	"github.com/coxswain-labs/coxswain/controller/acme"
	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/test/pebbletest"
)

// manager is a Manager on a file storage whose Served records the challenges it was asked for.
func manager(t *testing.T, served *atomic.Int64) *acme.Manager {
	t.Helper()
	m := acme.New(acme.Options{Storage: &certmagic.FileStorage{Path: t.TempDir()}, Registry: core.NewRegistry(),
		Served: func(_ context.Context, ch *irv1.ACMEChallenge) error {
			if ch.GetHostname() == "" || ch.GetToken() == "" {
				t.Errorf("challenge without hostname or token: %v", ch)
			}
			served.Add(1)
			return nil
		}})
	t.Cleanup(m.Close)
	return m
}

func await(t *testing.T, what string, f func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, why := f()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s", what, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestManagerExternalAccountBinding: against a Pebble that requires an external account binding,
// an issuer with the binding obtains its certificate and one without gets the CA's refusal as
// its state. Pebble takes challenges as passed here (the proxies' answering is tested in e2e).
func TestManagerExternalAccountBinding(t *testing.T) {
	p := pebbletest.Start(t, pebbletest.Options{HTTPPort: pebbletest.FreePort(t), TLSPort: pebbletest.FreePort(t), EAB: true, AlwaysValid: true})
	var served atomic.Int64
	m := manager(t, &served)
	bound := &translator.ACMEIssuer{Directory: p.Directory, CAPEM: p.CAPEM, EABKeyID: pebbletest.EABKeyID, EABHMAC: pebbletest.EABHMAC, Challenge: "http-01"}
	unbound := &translator.ACMEIssuer{Directory: p.Directory, CAPEM: p.CAPEM, Email: "nobody@example.test", Challenge: "http-01"}
	m.Sync([]*translator.ACMEOrder{{Issuer: bound, Hostname: "bound.example.test"}, {Issuer: unbound, Hostname: "unbound.example.test"}})
	await(t, "the bound account's certificate", func() (bool, string) {
		st := m.State(bound.Key(), "bound.example.test")
		return st.Certificate != nil, st.Error
	})
	st := m.State(bound.Key(), "bound.example.test")
	if _, err := tls.X509KeyPair(st.Certificate, st.PrivateKey); err != nil {
		t.Errorf("the obtained key pair does not load: %v", err)
	}
	await(t, "the unbound account's refusal", func() (bool, string) {
		st := m.State(unbound.Key(), "unbound.example.test")
		return strings.Contains(st.Error, "externalAccount"), st.Error
	})
	if m.State(unbound.Key(), "unbound.example.test").Certificate != nil {
		t.Error("a certificate without the binding")
	}
	if served.Load() == 0 {
		t.Error("Served was never asked")
	}
	if n := p.Issued(); n != 1 {
		t.Errorf("pebble issued %d certificates, want 1", n)
	}
}
