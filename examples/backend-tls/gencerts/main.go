// Command gencerts writes the example's demo PKI into a directory: a CA, the TLS backend's
// certificate (signed by the CA, for secure.backend.internal and a SPIFFE URI) and the
// Gateway's client certificate (signed by the same CA). The committed files were made with
//
//	go run ./examples/backend-tls/gencerts -out examples/backend-tls/certs
//
// They are demo keys, valid for a century so the example never expires: never use them for
// anything else.
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"log"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

func main() {
	out := flag.String("out", "examples/backend-tls/certs", "directory to write the PEM files into")
	flag.Parse()
	if err := os.MkdirAll(*out, 0o755); err != nil {
		log.Fatal(err)
	}
	caKey, caCert := mustKey(), (*x509.Certificate)(nil)
	caTmpl := template("Coxswain example backend CA", 1)
	caTmpl.IsCA, caTmpl.BasicConstraintsValid, caTmpl.KeyUsage = true, true, x509.KeyUsageCertSign
	caDER := mustCreate(caTmpl, caTmpl, caKey, caKey)
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		log.Fatal(err)
	}
	write(*out, "ca.crt", "CERTIFICATE", caDER)

	srvKey := mustKey()
	srv := template("secure.backend.internal", 2)
	srv.DNSNames = []string{"secure.backend.internal"}
	spiffe, _ := url.Parse("spiffe://example.internal/ns/default/sa/secure")
	srv.URIs = []*url.URL{spiffe}
	srv.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	write(*out, "backend.crt", "CERTIFICATE", mustCreate(srv, caCert, srvKey, caKey))
	writeKey(*out, "backend.key", srvKey)

	cliKey := mustKey()
	cli := template("coxswain-gateway", 3)
	cli.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	write(*out, "client.crt", "CERTIFICATE", mustCreate(cli, caCert, cliKey, caKey))
	writeKey(*out, "client.key", cliKey)
}

func template(cn string, serial int64) *x509.Certificate {
	return &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), NotAfter: time.Date(2125, 1, 1, 0, 0, 0, 0, time.UTC),
		KeyUsage: x509.KeyUsageDigitalSignature}
}

func mustKey() *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		log.Fatal(err)
	}
	return k
}

func mustCreate(tmpl, parent *x509.Certificate, key, signer *ecdsa.PrivateKey) []byte {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		log.Fatal(err)
	}
	return der
}

func writeKey(dir, name string, k *ecdsa.PrivateKey) {
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		log.Fatal(err)
	}
	write(dir, name, "EC PRIVATE KEY", der)
}

func write(dir, name, typ string, der []byte) {
	if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o644); err != nil {
		log.Fatal(err)
	}
}
