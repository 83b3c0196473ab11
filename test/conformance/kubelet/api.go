package kubelet

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"strconv"
	"time"

	"go.uber.org/zap"
)

// serveAPI serves the part of the kubelet API kube-apiserver uses here: container logs. It listens
// on HTTPS with a self-signed certificate; kube-apiserver started without
// --kubelet-certificate-authority does not verify it.
func (k *Kubelet) serveAPI() (*http.Server, error) {
	cert, err := selfSigned(k.cfg.NodeName, k.cfg.NodeIP.AsSlice())
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort(k.cfg.NodeIP.String(), strconv.Itoa(k.cfg.Port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("kubelet API: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", k.containerLogs)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
	}
	go func() {
		if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			k.log.Error("kubelet API stopped", zap.Error(err))
		}
	}()
	return srv, nil
}

// containerLogs answers GET /containerLogs/{namespace}/{pod}/{container}: the captured output of
// the running pod of that name. follow is not supported: the answer ends with the lines so far.
func (k *Kubelet) containerLogs(w http.ResponseWriter, r *http.Request) {
	ns, name, cname := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	rt := k.runtimeByName(ns, name)
	if rt == nil {
		http.Error(w, fmt.Sprintf("pod %s/%s is not running on this node", ns, name), http.StatusNotFound)
		return
	}
	c := rt.container(cname)
	if c == nil {
		http.Error(w, fmt.Sprintf("pod %s/%s has no container %q", ns, name, cname), http.StatusNotFound)
		return
	}
	q, err := parseLogQuery(r.URL.Query().Get, time.Now())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write(c.logs.render(q))
}

// selfSigned makes a serving certificate for the node's name and address.
func selfSigned(name string, ip net.IP) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{name},
		IPAddresses:  []net.IP{ip},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
