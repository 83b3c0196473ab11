// Command echo is the quickstart's backend: one process serving several loopback ports, each
// answering every request with its name, the request's method, host, path, query and headers as
// JSON, so you can see which backend a route chose and what the proxy sent it.
//
//	echo -listen app-v1=127.0.0.1:9001,app-v2=127.0.0.1:9002,web=127.0.0.1:9003
//
// A path that ends in /status/<code> (100-599) is answered with that status, so an example can
// make a backend fail on demand (the circuit breaker's). A listen address without a name is named
// after its port. Only loopback addresses are accepted:
// this is a demo backend, not something to expose.
//
// With -tls-cert and -tls-key every address serves HTTPS instead (examples/backend-tls), and the
// reply says which SNI the client asked for and which client certificate it showed; with
// -client-ca as well, a client certificate signed by that CA is required.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// reply is what every request gets back.
type reply struct {
	Backend string            `json:"backend"`
	Method  string            `json:"method"`
	Host    string            `json:"host"`
	Path    string            `json:"path"`
	Query   string            `json:"query,omitempty"`
	Headers map[string]string `json:"headers"`
	TLS     *tlsInfo          `json:"tls,omitempty"`
}

// tlsInfo is what a TLS backend saw of the handshake.
type tlsInfo struct {
	SNI    string `json:"sni"`
	Client string `json:"clientCertificate,omitempty"` // the subject CN
}

func main() {
	listen := flag.String("listen", "app-v1=127.0.0.1:9001,app-v2=127.0.0.1:9002,web=127.0.0.1:9003",
		"comma-separated [name=]address list of loopback addresses to serve")
	certFile := flag.String("tls-cert", "", "PEM certificate chain: serve HTTPS")
	keyFile := flag.String("tls-key", "", "PEM private key of -tls-cert")
	clientCA := flag.String("client-ca", "", "PEM CA bundle: require a client certificate it signed")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	tlsCfg, err := serverTLS(*certFile, *keyFile, *clientCA)
	if err != nil {
		log.Fatalf("echo: %v", err)
	}
	if err := run(ctx, *listen, tlsCfg); err != nil {
		log.Fatalf("echo: %v", err)
	}
}

// serverTLS is the TLS configuration of the flags, nil for cleartext.
func serverTLS(certFile, keyFile, clientCA string) (*tls.Config, error) {
	if certFile == "" {
		return nil, nil
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	if clientCA != "" {
		pem, err := os.ReadFile(clientCA)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: no PEM certificate", clientCA)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

func run(ctx context.Context, spec string, tlsCfg *tls.Config) error {
	var servers []*http.Server
	for _, item := range strings.Split(spec, ",") {
		name, addr, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok {
			addr, name = name, ""
		}
		if err := checkLoopback(addr); err != nil {
			return err
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		if name == "" {
			_, name, _ = net.SplitHostPort(ln.Addr().String())
		}
		srv := &http.Server{Handler: handler(name), ReadHeaderTimeout: 5 * time.Second}
		servers = append(servers, srv)
		scheme := "http"
		if tlsCfg != nil {
			ln, scheme = tls.NewListener(ln, tlsCfg), "https"
		}
		log.Printf("echo backend %q listening on %s://%s", name, scheme, ln.Addr())
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Printf("echo backend %q: %v", name, err)
			}
		}()
	}
	<-ctx.Done()
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range servers {
		_ = s.Shutdown(shutdown)
	}
	return nil
}

func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("listen address %q: only loopback addresses (127.0.0.0/8, ::1) are allowed", addr)
	}
	return nil
}

func handler(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rep := reply{Backend: name, Method: r.Method, Host: r.Host, Path: r.URL.Path, Query: r.URL.RawQuery,
			Headers: make(map[string]string, len(r.Header))}
		for k, v := range r.Header {
			rep.Headers[strings.ToLower(k)] = strings.Join(v, ", ")
		}
		if r.TLS != nil {
			rep.TLS = &tlsInfo{SNI: r.TLS.ServerName}
			if len(r.TLS.PeerCertificates) > 0 {
				rep.TLS.Client = r.TLS.PeerCertificates[0].Subject.CommonName
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Echo-Backend", name)
		if code, ok := statusOf(r.URL.Path); ok {
			w.WriteHeader(code)
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	})
}

// statusOf is the status a path ending in /status/<code> asks for.
func statusOf(path string) (int, bool) {
	i := strings.LastIndex(path, "/status/")
	if i < 0 {
		return 0, false
	}
	n, err := strconv.Atoi(path[i+len("/status/"):])
	if err != nil || n < 100 || n > 599 {
		return 0, false
	}
	return n, true
}
