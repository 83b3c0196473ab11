package integration

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/test/integration/env"
)

// cond is an expected condition: its type, status and reason.
type cond struct{ typ, status, reason string }

// checkConds checks every wanted condition is present with its status and reason, stamped for
// generation gen.
func checkConds(conds []metav1.Condition, gen int64, wants ...cond) error {
	for _, w := range wants {
		c := meta.FindStatusCondition(conds, w.typ)
		if c == nil {
			return fmt.Errorf("no %s condition in %v", w.typ, conds)
		}
		if string(c.Status) != w.status || c.Reason != w.reason {
			return fmt.Errorf("%s = %s/%s (%q), want %s/%s", w.typ, c.Status, c.Reason, c.Message, w.status, w.reason)
		}
		if c.ObservedGeneration != gen {
			return fmt.Errorf("%s observedGeneration = %d, want %d", w.typ, c.ObservedGeneration, gen)
		}
	}
	return nil
}

// waitGateway polls a Gateway until check accepts it and returns it.
func waitGateway(t testing.TB, e *env.Env, ns, name string, check func(*gwapiv1.Gateway) error) *gwapiv1.Gateway {
	t.Helper()
	var gw *gwapiv1.Gateway
	eventually(t, "Gateway "+ns+"/"+name, func() (err error) {
		if gw, err = e.Gateway.GatewayV1().Gateways(ns).Get(ctxFor(t), name, metav1.GetOptions{}); err != nil {
			return err
		}
		return check(gw)
	})
	return gw
}

// listener returns the status of listener name, or an error.
func listener(gw *gwapiv1.Gateway, name string) (*gwapiv1.ListenerStatus, error) {
	for i := range gw.Status.Listeners {
		if string(gw.Status.Listeners[i].Name) == name {
			return &gw.Status.Listeners[i], nil
		}
	}
	return nil, fmt.Errorf("no status for listener %s: %+v", name, gw.Status.Listeners)
}

// listenerConds checks the conditions of one listener of gw.
func listenerConds(gw *gwapiv1.Gateway, name string, wants ...cond) error {
	l, err := listener(gw, name)
	if err != nil {
		return err
	}
	if err := checkConds(l.Conditions, gw.Generation, wants...); err != nil {
		return fmt.Errorf("listener %s: %w", name, err)
	}
	return nil
}

// waitRouteParent polls an HTTPRoute until the parent status this controller (controllerName)
// wrote for the parentRef naming section passes check.
func waitRouteParent(t testing.TB, e *env.Env, ns, name, controllerName, section string, wants ...cond) *gwapiv1.HTTPRoute {
	t.Helper()
	if controllerName == "" {
		controllerName = translator.DefaultControllerName
	}
	var r *gwapiv1.HTTPRoute
	eventually(t, fmt.Sprintf("HTTPRoute %s/%s parent %q", ns, name, section), func() (err error) {
		if r, err = e.Gateway.GatewayV1().HTTPRoutes(ns).Get(ctxFor(t), name, metav1.GetOptions{}); err != nil {
			return err
		}
		for _, p := range r.Status.Parents {
			sec := ""
			if p.ParentRef.SectionName != nil {
				sec = string(*p.ParentRef.SectionName)
			}
			if string(p.ControllerName) == controllerName && sec == section {
				return checkConds(p.Conditions, r.Generation, wants...)
			}
		}
		return fmt.Errorf("no parent status of %s for section %q: %+v", controllerName, section, r.Status.Parents)
	})
	return r
}

// tlsSecret creates a kubernetes.io/tls Secret with a fresh self-signed certificate for hosts.
func tlsSecret(t testing.TB, e *env.Env, ns, name string, hosts ...string) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: hosts[0]},
		DNSNames:     hosts,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Kube.CoreV1().Secrets(ns).Create(ctxFor(t), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Type:       corev1.SecretTypeTLS,
		Data: map[string][]byte{
			corev1.TLSCertKey:       pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			corev1.TLSPrivateKeyKey: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}
