package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"
)

const gatewayClassYAML = `apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: coxswain}
spec:
  controllerName: coxswain-labs.dev/gateway-controller
`

// listener is one Gateway listener of a test Gateway.
type listener struct {
	name, protocol, hostname string
	port                     int
	certSecret               string
}

// gatewayYAML is a Gateway named gw bound to 127.0.0.1 with the given listeners.
func gatewayYAML(ls ...listener) string {
	var b strings.Builder
	b.WriteString(`apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: coxswain
  addresses: [{type: IPAddress, value: 127.0.0.1}]
  listeners:
`)
	for _, l := range ls {
		fmt.Fprintf(&b, "  - name: %s\n    protocol: %s\n    port: %d\n", l.name, l.protocol, l.port)
		if l.hostname != "" {
			fmt.Fprintf(&b, "    hostname: %q\n", l.hostname)
		}
		if l.certSecret != "" {
			fmt.Fprintf(&b, "    tls:\n      certificateRefs: [{name: %s}]\n", l.certSecret)
		}
	}
	return b.String()
}

// serviceYAML is a Service (port 80) and an EndpointSlice pointing at the backend.
func serviceYAML(b *backend) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: %[1]s}
spec:
  ports: [{name: http, port: 80}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: %[1]s
  labels: {kubernetes.io/service-name: %[1]s}
addressType: IPv4
ports: [{name: http, port: %[2]d}]
endpoints: [{addresses: [127.0.0.1]}]
`, b.name, b.port)
}

// servicesYAML joins the services of several backends.
func servicesYAML(bs ...*backend) string {
	docs := make([]string, len(bs))
	for i, b := range bs {
		docs[i] = serviceYAML(b)
	}
	return strings.Join(docs, "---\n")
}

// routeYAML is an HTTPRoute on Gateway gw with the given spec body (rules, hostnames), indented
// under spec.
func routeYAML(name, created, spec string) string {
	meta := "{name: " + name + "}"
	if created != "" {
		meta = fmt.Sprintf("{name: %s, creationTimestamp: %q}", name, created)
	}
	return fmt.Sprintf(`apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: %s
spec:
  parentRefs: [{name: gw}]
%s`, meta, spec)
}

// selfSigned returns a PEM certificate and key for hostname, and the certificate's serial.
func selfSigned(t *testing.T, hostname string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: hostname},
		DNSNames:              []string{hostname},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd})
}

// tlsSecretYAML is a kubernetes.io/tls Secret, with the PEM in stringData.
func tlsSecretYAML(name string, certPEM, keyPEM []byte) string {
	indent := func(b []byte) string {
		return "    " + strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", "\n    ") + "\n"
	}
	return fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: %s}\ntype: kubernetes.io/tls\nstringData:\n  tls.crt: |\n%s  tls.key: |\n%s",
		name, indent(certPEM), indent(keyPEM))
}
