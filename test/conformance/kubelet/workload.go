package kubelet

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Workload is how the kubelet runs an image: a local binary, run with the container's args, and
// the ports it listens on once it is up (what an image states with EXPOSE; computed from the
// container's env, because the servers pick their ports from it). A container is Ready once
// every one of these ports is bound.
type Workload struct {
	Binary string
	Ports  func(env map[string]string) []Port
}

// Catalog maps image repositories (references without tag or digest) to workloads. An image it
// does not know leaves its pod waiting, with the reason in the pod's status.
type Catalog map[string]Workload

func (c Catalog) lookup(image string) (Workload, error) {
	w, ok := c[repository(image)]
	if !ok {
		return Workload{}, fmt.Errorf("image %s: no local workload for repository %s", image, repository(image))
	}
	return w, nil
}

// repository strips the tag and the digest from an image reference.
func repository(image string) string {
	if i := strings.IndexByte(image, '@'); i >= 0 {
		image = image[:i]
	}
	if i := strings.LastIndexByte(image, ':'); i > strings.LastIndexByte(image, '/') {
		image = image[:i]
	}
	return image
}

// EchoBasic is the Gateway API conformance echo server (sigs.k8s.io/gateway-api/conformance/
// echo-basic) built from the conformance module: one binary with an HTTP, a gRPC, a TCP and a
// UDP mode, chosen by env as in the image.
func EchoBasic(binary string) Workload {
	return Workload{Binary: binary, Ports: echoBasicPorts}
}

// echoBasicPorts mirrors echo-basic's own choice of ports and modes.
func echoBasicPorts(env map[string]string) []Port {
	port := func(name string, def uint16, proto corev1.Protocol) Port {
		n, err := strconv.ParseUint(env[name], 10, 16)
		if err != nil {
			n = uint64(def)
		}
		return Port{Number: uint16(n), Protocol: proto}
	}
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	tlsWith := func(keyVar string) bool { return env["TLS_SERVER_CERT"] != "" && env[keyVar] != "" }
	var out []Port
	switch {
	case env["GRPC_ECHO_SERVER"] != "":
		out = append(out, port("HTTP_PORT", 3000, tcp))
		if tlsWith("TLS_SERVER_PRIV_KEY") {
			out = append(out, port("HTTPS_PORT", 8443, tcp))
		}
	case env["TCP_ECHO_SERVER"] != "":
		out = append(out, port("TCP_PORT", 3000, tcp))
		if tlsWith("TLS_SERVER_PRIV_KEY") {
			out = append(out, port("TLS_PORT", 8443, tcp))
		}
	case env["UDP_ECHO_SERVER"] != "":
		out = append(out, port("UDP_PORT", 8080, udp))
	default:
		out = append(out, port("HTTP_PORT", 3000, tcp), port("H2C_PORT", 3001, tcp))
		if tlsWith("TLS_SERVER_PRIVKEY") {
			out = append(out, port("HTTPS_PORT", 8443, tcp))
		}
	}
	return out
}

// DNSResponder is the harness's stand-in for the coredns image: it reads the same -conf Corefile
// and answers on port 53 over UDP.
func DNSResponder(binary string) Workload {
	return Workload{Binary: binary, Ports: func(map[string]string) []Port {
		return []Port{{Number: 53, Protocol: corev1.ProtocolUDP}}
	}}
}

// CoxswainAdminPort is the --admin-address port of the proxies Coxswain provisions.
const CoxswainAdminPort = 9901

// CoxswainProxy is Coxswain's own image (the chart's and --proxy-image's), run as the coxswain
// binary: the dedicated proxies the controller provisions. Its admin endpoint, bound first thing,
// is the port that makes the container Ready; the Gateway's Programmed condition says when its
// listeners are bound.
func CoxswainProxy(binary string) Workload {
	return Workload{Binary: binary, Ports: func(map[string]string) []Port {
		return []Port{{Number: CoxswainAdminPort, Protocol: corev1.ProtocolTCP}}
	}}
}
