package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/test/integration/env"
)

// TestHTTP3Policy: a ClientTrafficPolicy with http3 against the real API server (the CRD from
// deploy/crds takes the field), through the controller into its in-process proxy: the IR
// listener carries http3 with the Gateway listener's port, the status writer records the
// listener's coxswain-labs.dev/HTTP3 condition, and quic-go's client is served over HTTP/3 on
// the listener's port while HTTPS/1.1 answers advertise it.
func TestHTTP3Policy(t *testing.T) {
	e := env.Start(t)
	snaps := &publishedSnapshots{}
	startController(t, e, controllerOpts{published: snaps})
	ns := namespace(t, e, "h3", nil)
	const port = 19330
	startBackend(t, "h3", "10.99.93.1:8080")
	createService(t, e, ns, "svc", "10.99.93.1")
	cert := tlsSecret(t, e, ns, "cert", "h3.example")
	createClass(t, e, "h3", "")
	createGateway(t, e, ns, "gw", "h3", gwapiv1.Listener{Name: "https", Port: port, Protocol: gwapiv1.HTTPSProtocolType,
		Hostname: ptr.To(gwapiv1.Hostname("h3.example")),
		TLS:      &gwapiv1.ListenerTLSConfig{CertificateRefs: []gwapiv1.SecretObjectReference{certRef("", "cert")}}})
	createRoute(t, e, httpRoute(ns, "r", []gwapiv1.ParentReference{parentRef(ns, "gw")}, nil, prefixRule("/", backendRef("svc", 1))))
	createCTP(t, e, ns, "h3", map[string]any{
		"targetRefs": []any{gatewayTarget("gw", "")},
		"http3":      map[string]any{"enabled": true},
	})

	waitIRListener(t, snaps, port, func(l *irv1.Listener) error {
		if h := l.GetHttp3(); h == nil || h.GetAdvertisedPort() != port || h.GetAllow_0Rtt() {
			return fmt.Errorf("http3 %v, want advertised port %d without 0-RTT", h, port)
		}
		return nil
	})
	waitGateway(t, e, ns, "gw", func(g *gwapiv1.Gateway) error {
		l, err := listener(g, "https")
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(l.Conditions, "coxswain-labs.dev/HTTP3")
		if c == nil || c.Status != "True" || c.Reason != "Enabled" {
			return fmt.Errorf("HTTP3 condition %+v, want True Enabled", c)
		}
		return nil
	})

	roots := x509.NewCertPool()
	roots.AddCert(cert)
	addr := net.JoinHostPort(gatewayIP, strconv.Itoa(port))
	tr := &http3.Transport{TLSClientConfig: &tls.Config{RootCAs: roots},
		Dial: func(ctx context.Context, _ string, tc *tls.Config, qc *quic.Config) (*quic.Conn, error) {
			return quic.DialAddrEarly(ctx, addr, tc, qc)
		}}
	defer func() { _ = tr.Close() }()
	h3 := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	eventually(t, "served over HTTP/3", func() error {
		resp, err := h3.Get(fmt.Sprintf("https://h3.example:%d/over-quic", port))
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.ProtoMajor != 3 || resp.StatusCode != http.StatusOK || string(body) != "h3 /over-quic" {
			return fmt.Errorf("%s %d %q", resp.Proto, resp.StatusCode, body)
		}
		return nil
	})

	tcp := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}}
	resp, err := tcp.Get(fmt.Sprintf("https://h3.example:%d/", port))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if a, want := resp.Header.Get("Alt-Svc"), fmt.Sprintf(`h3=":%d"; ma=86400`, port); a != want {
		t.Errorf("Alt-Svc %q, want %q", a, want)
	}
}
