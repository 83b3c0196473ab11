package serviceproxy

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/coxswain-labs/coxswain/test/integration/netns"
)

// The tests apply real rulesets, inside a private network namespace.
func TestMain(m *testing.M) { os.Exit(netns.Run(m)) }

var cidr = netip.MustParsePrefix("10.96.0.0/16")

func service(name, ip string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: corev1.ServiceSpec{ClusterIP: ip, Ports: ports}}
}

func slice(svc string, ports []discoveryv1.EndpointPort, ready *bool, addrs ...string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: svc + "-x", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4, Ports: ports,
	}
	for _, a := range addrs {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: ready}})
	}
	return s
}

func port(name string, n int32, proto corev1.Protocol) discoveryv1.EndpointPort {
	return discoveryv1.EndpointPort{Name: &name, Port: &n, Protocol: &proto}
}

// Endpoints are matched to Service ports by name and protocol; not-ready ones and headless
// Services are left out.
func TestBackends(t *testing.T) {
	no := false
	got := Backends(
		[]*corev1.Service{
			service("web", "10.96.0.7",
				corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromInt32(3000)},
				corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}),
			service("headless", "None", corev1.ServicePort{Port: 80}),
		},
		[]*discoveryv1.EndpointSlice{
			slice("web", []discoveryv1.EndpointPort{port("http", 3000, corev1.ProtocolTCP), port("dns", 5353, corev1.ProtocolUDP)}, nil, "10.244.0.9", "10.244.0.3"),
			slice("web", []discoveryv1.EndpointPort{port("http", 3000, corev1.ProtocolTCP)}, &no, "10.244.0.4"),
			slice("headless", []discoveryv1.EndpointPort{port("", 80, corev1.ProtocolTCP)}, nil, "10.244.0.5"),
		})
	ep := func(a string, p int32) Endpoint { return Endpoint{Addr: netip.MustParseAddr(a), Port: p} }
	want := []Backend{
		{Name: "ns/web:53/UDP", ClusterIP: netip.MustParseAddr("10.96.0.7"), Protocol: corev1.ProtocolUDP, Port: 53,
			Endpoints: []Endpoint{ep("10.244.0.3", 5353), ep("10.244.0.9", 5353)}},
		{Name: "ns/web:80/TCP", ClusterIP: netip.MustParseAddr("10.96.0.7"), Protocol: corev1.ProtocolTCP, Port: 80,
			Endpoints: []Endpoint{ep("10.244.0.3", 3000), ep("10.244.0.9", 3000)}},
	}
	if len(got) != len(want) {
		t.Fatalf("backends %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].Name != want[i].Name || got[i].ClusterIP != want[i].ClusterIP || got[i].Port != want[i].Port ||
			!slices.Equal(got[i].Endpoints, want[i].Endpoints) {
			t.Errorf("backend %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

// A connection to a cluster IP reaches one of its endpoints, each of them in time; UDP too; a
// Service port without endpoints, and one the Service does not have, are refused at once.
func TestRulesetTranslates(t *testing.T) {
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("nft (Debian package nftables) not installed")
	}
	// Endpoints on addresses of netns.Range, local to the namespace like pods are reachable.
	a, b := listen(t, "10.99.0.11:3000"), listen(t, "10.99.0.12:3000")
	udp, err := net.ListenPacket("udp", "10.99.0.13:5353")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	go func() {
		buf := make([]byte, 64)
		for {
			n, from, err := udp.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = udp.WriteTo(append([]byte("udp:"), buf[:n]...), from)
		}
	}()
	backends := []Backend{
		{Name: "ns/web:80/TCP", ClusterIP: netip.MustParseAddr("10.96.0.7"), Protocol: corev1.ProtocolTCP, Port: 80,
			Endpoints: []Endpoint{{netip.MustParseAddr("10.99.0.11"), 3000}, {netip.MustParseAddr("10.99.0.12"), 3000}}},
		{Name: "ns/dns:53/UDP", ClusterIP: netip.MustParseAddr("10.96.0.7"), Protocol: corev1.ProtocolUDP, Port: 53,
			Endpoints: []Endpoint{{netip.MustParseAddr("10.99.0.13"), 5353}}},
		{Name: "ns/empty:80/TCP", ClusterIP: netip.MustParseAddr("10.96.0.8"), Protocol: corev1.ProtocolTCP, Port: 80},
	}
	if err := nft(Ruleset(backends, cidr)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nft("delete table ip " + Table + "\n") })
	// Applying again replaces the table rather than adding to it.
	if err := nft(Ruleset(backends, cidr)); err != nil {
		t.Fatal(err)
	}

	seen := map[string]bool{}
	deadline := time.Now().Add(10 * time.Second)
	for len(seen) < 2 && time.Now().Before(deadline) {
		seen[dialRead(t, "tcp", "10.96.0.7:80", "")] = true
	}
	if !seen[a] || !seen[b] {
		t.Errorf("connections to 10.96.0.7:80 reached %v, want both %s and %s", seen, a, b)
	}
	if got := dialRead(t, "udp", "10.96.0.7:53", "q"); got != "udp:q" {
		t.Errorf("UDP 10.96.0.7:53 answered %q", got)
	}
	for _, addr := range []string{"10.96.0.8:80", "10.96.0.7:81", "10.96.9.9:80"} {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err == nil {
			c.Close()
			t.Errorf("%s: connected, want refused", addr)
		} else if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("%s: %v, want connection refused", addr, err)
		}
	}
}

// listen serves its own address to every connection and returns it.
func listen(t *testing.T, addr string) string {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte(addr))
			c.Close()
		}
	}()
	return addr
}

func dialRead(t *testing.T, network, addr, send string) string {
	t.Helper()
	c, err := net.DialTimeout(network, addr, 2*time.Second)
	if err != nil {
		t.Fatalf("dial %s %s: %v", network, addr, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if send != "" {
		if _, err := c.Write([]byte(send)); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 64)
		n, err := c.Read(buf)
		if err != nil {
			t.Fatalf("read %s: %v", addr, err)
		}
		return string(buf[:n])
	}
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("read %s: %v", addr, err)
	}
	return string(b)
}
