package conformance_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/coxswain-labs/coxswain/test/conformance/harness"
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// create runs a create call, tolerating AlreadyExists.
func create(_ context.Context, f func() error) error {
	if err := f(); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

func poll(ctx context.Context, t *testing.T, c *harness.Cluster, what string, cond func() (bool, string)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		ok, why := cond()
		last = why
		return ok, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v (last: %s; logs: %s, pods in %s/pods)", what, err, last, c.Coxswain.Logs(), c.Artifacts)
	}
}

func ownedBy(refs []metav1.OwnerReference, uid types.UID) bool {
	for _, r := range refs {
		if r.UID == uid && r.Kind == "Gateway" && ptr.Deref(r.Controller, false) {
			return true
		}
	}
	return false
}

func podStates(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		s := p.Name + " " + string(p.Status.Phase)
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil {
				s += " waiting " + w.Reason + ": " + w.Message
			}
		}
		out = append(out, s)
	}
	return out
}

// tlsSecret creates a kubernetes.io/tls Secret with a fresh self-signed certificate for host and
// returns that certificate, for clients to trust.
func tlsSecret(ctx context.Context, kube kubernetes.Interface, ns, name, host string) (*x509.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	_, err = kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{
			corev1.TLSCertKey:       pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			corev1.TLSPrivateKeyKey: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	return x509.ParseCertificate(der)
}

// echoed is what echo-basic answers: the request it saw and the pod that served it.
type echoed struct {
	Path, Host, Namespace, Pod string
}

// echoGet sends GET url with the Host header host through client and wants echo-basic's 200
// answer from a pod of ns, over HTTP major version proto (any when 0); it says what answered,
// or why not (for poll).
func echoGet(ctx context.Context, client *http.Client, url, host, ns string, proto int) (bool, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, err.Error()
	}
	req.Host = host
	resp, err := client.Do(req)
	if err != nil {
		return false, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || (proto != 0 && resp.ProtoMajor != proto) {
		return false, fmt.Sprintf("%s: %s %d %s", url, resp.Proto, resp.StatusCode, b)
	}
	var e echoed
	if err := json.Unmarshal(b, &e); err != nil {
		return false, fmt.Sprintf("%s: %s (%v)", url, b, err)
	}
	if !strings.HasPrefix(req.URL.Path, e.Path) || e.Namespace != ns || !strings.HasPrefix(e.Pod, "echo-") {
		return false, fmt.Sprintf("%s: echo says %+v", url, e)
	}
	return true, fmt.Sprintf("%s %s (Host %s) answered by %s with path %s", resp.Proto, url, host, e.Pod, e.Path)
}

// httpsClient sends every request to addr over TLS, trusting only cert.
func httpsClient(addr string, cert *x509.Certificate) *http.Client {
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}}
}

// http3Client sends every request over QUIC to the UDP address addr, trusting only cert; close
// the returned transport when done.
func http3Client(addr string, cert *x509.Certificate) (*http.Client, io.Closer) {
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	tr := &http3.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS13},
		Dial: func(ctx context.Context, _ string, tc *tls.Config, qc *quic.Config) (*quic.Conn, error) {
			return quic.DialAddrEarly(ctx, addr, tc, qc)
		}}
	return &http.Client{Timeout: 5 * time.Second, Transport: tr}, tr
}
