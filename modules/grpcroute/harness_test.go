package grpcroute_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
	"github.com/coxswain-labs/coxswain/core/proxy/listener"
	"github.com/coxswain-labs/coxswain/modules/filters/headers"
	"github.com/coxswain-labs/coxswain/modules/grpcroute"
	"github.com/coxswain-labs/coxswain/modules/grpcroute/grpctest"
	"github.com/coxswain-labs/coxswain/modules/httproute"
	"github.com/coxswain-labs/coxswain/modules/lb/roundrobin"
)

func registry() *core.Registry {
	return core.NewRegistry(&listener.HTTP{}, &listener.HTTPS{}, &roundrobin.RoundRobin{},
		(*grpcroute.Matcher)(nil), (*httproute.Matcher)(nil),
		(*headers.RequestModifier)(nil), (*headers.ResponseModifier)(nil))
}

// startProxy runs a real proxy serving snap (whose listeners bind port 0) and returns the bound
// address of each listener, in the snapshot's order.
func startProxy(t testing.TB, ls []*irv1.Listener, cs []*irv1.Cluster, secrets ...*irv1.Secret) []string {
	t.Helper()
	return startProxyWith(t, proxy.Limits{}, ls, cs, secrets...)
}

// startProxyWith is startProxy with the proxy's limits set (zero fields keep their defaults).
func startProxyWith(t testing.TB, limits proxy.Limits, ls []*irv1.Listener, cs []*irv1.Cluster, secrets ...*irv1.Secret) []string {
	t.Helper()
	p := proxy.New(proxy.Options{Log: zap.NewNop(), Registry: registry(), Limits: limits})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	snap := &irv1.Snapshot{Listeners: ls, Clusters: cs, Secrets: secrets}
	if err := irv1.Seal(snap); err != nil {
		t.Fatal(err)
	}
	if err := p.Apply(context.Background(), snap); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	byName := map[string]string{}
	for _, b := range p.Bound() {
		byName[b.Name] = b.Address
	}
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = byName[l.GetName()]
	}
	return out
}

// plainListener is a cleartext HTTP listener on an ephemeral loopback port.
func plainListener(name string, servers ...*irv1.Server) *irv1.Listener {
	return &irv1.Listener{Name: name, Address: "127.0.0.1", Protocol: "HTTP", Servers: servers}
}

func server(host string, vhosts ...*irv1.VirtualHost) *irv1.Server {
	return &irv1.Server{Hostname: host, VirtualHosts: vhosts}
}

func vhost(host string, routes ...*irv1.Route) *irv1.VirtualHost {
	return &irv1.VirtualHost{Hostname: host, Routes: routes}
}

// grpcRoute is one route.grpc route.
func grpcRoute(name string, m grpcroute.Match, backends ...*irv1.Backend) *irv1.Route {
	return &irv1.Route{Name: name, Match: core.MustConfig(grpcroute.ModuleID, m), Backends: backends}
}

func backend(cluster string, weight uint32, filters ...*irv1.ModuleConfig) *irv1.Backend {
	return &irv1.Backend{Cluster: cluster, Weight: weight, Filters: filters}
}

// h2cCluster is a cluster of gRPC backends, reached over cleartext HTTP/2.
func h2cCluster(name string, ss ...*grpctest.Server) *irv1.Cluster {
	c := &irv1.Cluster{Name: name, Protocol: irv1.Cluster_H2C}
	for _, s := range ss {
		c.Endpoints = append(c.Endpoints, &irv1.Endpoint{Address: "127.0.0.1", Port: s.Port, Weight: 1})
	}
	return c
}

func methodMatch(typ, service, method string) grpcroute.Match {
	return grpcroute.Match{Method: &grpcroute.MethodMatch{Type: typ, Service: service, Method: method}}
}

// selfSigned returns a PEM certificate and key for names.
func selfSigned(t testing.TB, names ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: names[0]},
		DNSNames:     names,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}
