package integration

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/test/integration/env"
)

// l4Parents reads a TCPRoute, TLSRoute or UDPRoute and returns its generation and parent
// statuses.
func l4Parents(t testing.TB, e *env.Env, kind, ns, name string) (int64, []gwapiv1.RouteParentStatus, error) {
	v1 := e.Gateway.GatewayV1()
	switch kind {
	case "TCPRoute":
		r, err := v1.TCPRoutes(ns).Get(ctxFor(t), name, metav1.GetOptions{})
		if err != nil {
			return 0, nil, err
		}
		return r.Generation, r.Status.Parents, nil
	case "TLSRoute":
		r, err := v1.TLSRoutes(ns).Get(ctxFor(t), name, metav1.GetOptions{})
		if err != nil {
			return 0, nil, err
		}
		return r.Generation, r.Status.Parents, nil
	case "UDPRoute":
		r, err := v1.UDPRoutes(ns).Get(ctxFor(t), name, metav1.GetOptions{})
		if err != nil {
			return 0, nil, err
		}
		return r.Generation, r.Status.Parents, nil
	}
	return 0, nil, fmt.Errorf("no such layer-4 kind %q", kind)
}

// l4RouteConds waits until our parent status of a layer-4 route has the wanted conditions and,
// when absent is set, lacks the condition types it names.
func l4RouteConds(t testing.TB, e *env.Env, kind, ns, name string, absent []string, wants ...cond) {
	t.Helper()
	eventually(t, fmt.Sprintf("%s %s/%s status", kind, ns, name), func() error {
		gen, parents, err := l4Parents(t, e, kind, ns, name)
		if err != nil {
			return err
		}
		for _, p := range parents {
			if p.ControllerName != translator.DefaultControllerName {
				continue
			}
			for _, typ := range absent {
				if c := meta.FindStatusCondition(p.Conditions, typ); c != nil {
					return fmt.Errorf("unexpected %s=%s/%s (%q)", typ, c.Status, c.Reason, c.Message)
				}
			}
			return checkConds(p.Conditions, gen, wants...)
		}
		return fmt.Errorf("no parent status of ours: %+v", parents)
	})
}

// l4Ref is a backendRef to port of a Service.
func l4Ref(svc string, port, weight int32) gwapiv1.BackendRef {
	return gwapiv1.BackendRef{
		BackendObjectReference: gwapiv1.BackendObjectReference{Name: gwapiv1.ObjectName(svc), Port: ptr.To(gwapiv1.PortNumber(port))},
		Weight:                 ptr.To(weight),
	}
}

// sectionRef is a parentRef to one listener of a Gateway.
func sectionRef(ns, gateway, section string) gwapiv1.ParentReference {
	p := parentRef(ns, gateway)
	p.SectionName = ptr.To(gwapiv1.SectionName(section))
	return p
}

// waitListener waits until listener name of a Gateway has the wanted conditions, supportedKinds
// and attachedRoutes.
func waitListener(t testing.TB, e *env.Env, ns, gw, name string, kinds []string, attached int32, wants ...cond) {
	t.Helper()
	waitGateway(t, e, ns, gw, func(g *gwapiv1.Gateway) error {
		if err := listenerConds(g, name, wants...); err != nil {
			return err
		}
		l, _ := listener(g, name)
		var got []string
		for _, k := range l.SupportedKinds {
			got = append(got, string(k.Kind))
		}
		if strings.Join(got, ",") != strings.Join(kinds, ",") {
			return fmt.Errorf("listener %s supportedKinds %v, want %v", name, got, kinds)
		}
		if l.AttachedRoutes != attached {
			return fmt.Errorf("listener %s attachedRoutes %d, want %d", name, l.AttachedRoutes, attached)
		}
		return nil
	})
}

// startNameServer is a TCP backend on addr (TLS when cert is set) that greets every connection
// with its name and a newline, then echoes what it reads until the client closes.
func startNameServer(t testing.TB, name, addr string, cert *tls.Certificate) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("backend %s: %v", name, err)
	}
	if cert != nil {
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{*cert}, MinVersion: tls.VersionTLS12})
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(30 * time.Second))
				if _, err := io.WriteString(c, name+"\n"); err != nil {
					return
				}
				_, _ = io.Copy(c, c)
			}()
		}
	}()
}

// keyPair is a fresh self-signed certificate for hosts, as a tls.Certificate and parsed.
func keyPair(t testing.TB, hosts ...string) (tls.Certificate, *x509.Certificate) {
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
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, leaf
}

// tlsAnswer is what a TLS connection through the gateway met: the certificate that answered the
// handshake and the name of the backend that greeted it.
type tlsAnswer struct {
	cert    *x509.Certificate
	backend string
}

// tlsHello dials the gateway's port with SNI sni (none when empty), verifies the server's
// certificate against roots (accepts any when roots is nil, so that any handshake the gateway
// completes is seen), reads the backend's greeting and checks one echo round trip.
func tlsHello(port int, sni string, roots *x509.CertPool) (tlsAnswer, error) {
	d := &net.Dialer{Timeout: 2 * time.Second}
	cfg := &tls.Config{ServerName: sni, RootCAs: roots, MinVersion: tls.VersionTLS12}
	if roots == nil {
		cfg.InsecureSkipVerify = true // the test compares the certificate itself
	}
	c, err := tls.DialWithDialer(d, "tcp", fmt.Sprintf("%s:%d", gatewayIP, port), cfg)
	if err != nil {
		return tlsAnswer{}, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	ans := tlsAnswer{cert: c.ConnectionState().PeerCertificates[0]}
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil {
		return ans, fmt.Errorf("greeting: %w", err)
	}
	ans.backend = strings.TrimSuffix(line, "\n")
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		return ans, err
	}
	if echo, err := br.ReadString('\n'); err != nil || echo != "ping\n" {
		return ans, fmt.Errorf("echo %q: %v", echo, err)
	}
	return ans, nil
}

// tlsServed waits until a connection with SNI sni is answered with cert and greeted by backend.
func tlsServed(t testing.TB, port int, sni string, roots *x509.CertPool, cert *x509.Certificate, backend string) {
	t.Helper()
	eventually(t, fmt.Sprintf("TLS %q served by %s", sni, backend), func() error {
		ans, err := tlsHello(port, sni, roots)
		if err != nil {
			return err
		}
		if !ans.cert.Equal(cert) {
			return fmt.Errorf("certificate of %v answered, want %v", ans.cert.DNSNames, cert.DNSNames)
		}
		if ans.backend != backend {
			return fmt.Errorf("greeted by %q, want %q", ans.backend, backend)
		}
		return nil
	})
}

// tlsDropped waits until a connection with SNI sni is closed by the gateway before any handshake
// completes (the ClientHello matched no listener). The client accepts any certificate, so a
// handshake with the wrong one counts as served, not dropped.
func tlsDropped(t testing.TB, port int, sni string) {
	t.Helper()
	eventually(t, fmt.Sprintf("TLS %q dropped", sni), func() error {
		ans, err := tlsHello(port, sni, nil)
		if err == nil {
			return fmt.Errorf("served by %q", ans.backend)
		}
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return fmt.Errorf("nothing listens yet: %w", err)
		}
		if ans.cert != nil {
			return fmt.Errorf("a handshake completed (certificate %v): %v", ans.cert.DNSNames, err)
		}
		return nil
	})
}
