package kubelet

import (
	"slices"
	"testing"
)

func TestRepository(t *testing.T) {
	for in, want := range map[string]string{
		"registry.k8s.io/gateway-api/echo-basic:v1.5.1":       "registry.k8s.io/gateway-api/echo-basic",
		"registry.k8s.io/coredns/coredns@sha256:abc":          "registry.k8s.io/coredns/coredns",
		"localhost:5000/echo:v1@sha256:abc":                   "localhost:5000/echo",
		"localhost:5000/echo":                                 "localhost:5000/echo",
		"registry.k8s.io/gateway-api/echo-basic":              "registry.k8s.io/gateway-api/echo-basic",
		"registry.k8s.io/gateway-api/echo-basic:v1.6.0-dev.3": "registry.k8s.io/gateway-api/echo-basic",
	} {
		if got := repository(in); got != want {
			t.Errorf("repository(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestEchoBasicPorts(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"http", nil, []string{"3000/TCP", "3001/TCP"}},
		{"http with TLS", map[string]string{"TLS_SERVER_CERT": "c", "TLS_SERVER_PRIVKEY": "k"}, []string{"3000/TCP", "3001/TCP", "8443/TCP"}},
		{"http ignores the gRPC key name", map[string]string{"TLS_SERVER_CERT": "c", "TLS_SERVER_PRIV_KEY": "k"}, []string{"3000/TCP", "3001/TCP"}},
		{"http ports from env", map[string]string{"HTTP_PORT": "8080", "H2C_PORT": "8081"}, []string{"8080/TCP", "8081/TCP"}},
		{"grpc", map[string]string{"GRPC_ECHO_SERVER": "1"}, []string{"3000/TCP"}},
		{"grpc with TLS", map[string]string{"GRPC_ECHO_SERVER": "1", "TLS_SERVER_CERT": "c", "TLS_SERVER_PRIV_KEY": "k"}, []string{"3000/TCP", "8443/TCP"}},
		{"tcp with TLS", map[string]string{"TCP_ECHO_SERVER": "1", "TLS_SERVER_CERT": "c", "TLS_SERVER_PRIV_KEY": "k"}, []string{"3000/TCP", "8443/TCP"}},
		{"udp", map[string]string{"UDP_ECHO_SERVER": "1", "UDP_PORT": "5353"}, []string{"5353/UDP"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, p := range echoBasicPorts(tc.env) {
				got = append(got, p.String())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("ports = %v, want %v", got, tc.want)
			}
		})
	}
}
