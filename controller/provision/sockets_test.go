package provision

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	policyv1a1 "github.com/coxswain-labs/coxswain/modules/api/policy/v1alpha1"
)

func h3Policy(name string, age time.Duration, enabled bool, section string) *policyv1a1.ClientTrafficPolicy {
	ref := gwapiv1.LocalPolicyTargetReferenceWithSectionName{LocalPolicyTargetReference: gwapiv1.LocalPolicyTargetReference{
		Group: gwapiv1.GroupName, Kind: "Gateway", Name: "web"}}
	if section != "" {
		ref.SectionName = ptr.To(gwapiv1.SectionName(section))
	}
	return &policyv1a1.ClientTrafficPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, CreationTimestamp: metav1.NewTime(time.Unix(1e9, 0).Add(-age))},
		Spec: policyv1a1.ClientTrafficPolicySpec{TargetRefs: []gwapiv1.LocalPolicyTargetReferenceWithSectionName{ref},
			HTTP3: &policyv1a1.HTTP3Settings{Enabled: enabled}},
	}
}

func keysString(s Sockets) string {
	var out []string
	for _, k := range s.All() {
		out = append(out, fmt.Sprintf("%d/%s", k.Port, k.Protocol))
	}
	return fmt.Sprint(out)
}

func TestGatewaySockets(t *testing.T) {
	all := gwapiv1.NamespacesFromAll
	gw := &gwapiv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}, Spec: gwapiv1.GatewaySpec{
		Listeners: []gwapiv1.Listener{
			{Name: "http", Port: 80, Protocol: gwapiv1.HTTPProtocolType},
			{Name: "https", Port: 443, Protocol: gwapiv1.HTTPSProtocolType},
			{Name: "alt", Port: 8443, Protocol: gwapiv1.HTTPSProtocolType},
		},
		AllowedListeners: &gwapiv1.AllowedListeners{Namespaces: &gwapiv1.ListenerNamespaces{From: &all}},
	}}
	set := &gwapiv1.ListenerSet{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "more"}, Spec: gwapiv1.ListenerSetSpec{
		ParentRef: gwapiv1.ParentGatewayReference{Name: "web", Namespace: ptr.To(gwapiv1.Namespace("shop"))},
		Listeners: []gwapiv1.ListenerEntry{
			{Name: "extra", Port: 9443, Protocol: gwapiv1.HTTPSProtocolType},
			{Name: "dns", Port: 53, Protocol: gwapiv1.UDPProtocolType},
		},
	}}
	for _, tc := range []struct {
		name     string
		sets     []*gwapiv1.ListenerSet
		policies []*policyv1a1.ClientTrafficPolicy
		extra    []gwapiv1.Listener
		noAllow  bool
		want     string
	}{
		{name: "listeners only", want: "[80/TCP 443/TCP 8443/TCP]"},
		{name: "a ListenerSet's listeners", sets: []*gwapiv1.ListenerSet{set}, want: "[53/UDP 80/TCP 443/TCP 8443/TCP 9443/TCP]"},
		{name: "a ListenerSet the Gateway does not allow", sets: []*gwapiv1.ListenerSet{set}, noAllow: true, want: "[80/TCP 443/TCP 8443/TCP]"},
		{name: "HTTP/3 on the whole Gateway, its ListenerSets' HTTPS too", sets: []*gwapiv1.ListenerSet{set},
			policies: []*policyv1a1.ClientTrafficPolicy{h3Policy("h3", time.Hour, true, "")},
			want:     "[53/UDP 80/TCP 443/TCP 443/UDP 8443/TCP 8443/UDP 9443/TCP 9443/UDP]"},
		{name: "a listener's own policy wins over the Gateway's",
			policies: []*policyv1a1.ClientTrafficPolicy{h3Policy("h3", time.Hour, true, ""), h3Policy("off", time.Minute, false, "alt")},
			want:     "[80/TCP 443/TCP 443/UDP 8443/TCP]"},
		{name: "the oldest Gateway policy wins",
			policies: []*policyv1a1.ClientTrafficPolicy{h3Policy("new", time.Minute, true, ""), h3Policy("old", time.Hour, false, "")},
			want:     "[80/TCP 443/TCP 8443/TCP]"},
		{name: "a UDP listener keeps its port", extra: []gwapiv1.Listener{{Name: "quic", Port: 443, Protocol: gwapiv1.UDPProtocolType}},
			policies: []*policyv1a1.ClientTrafficPolicy{h3Policy("h3", time.Hour, true, "https")},
			want:     "[80/TCP 443/TCP 443/UDP 8443/TCP]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gw.DeepCopy()
			g.Spec.Listeners = append(g.Spec.Listeners, tc.extra...)
			if tc.noAllow {
				g.Spec.AllowedListeners = nil
			}
			s := gatewaySockets(g, tc.sets, tc.policies)
			if got := keysString(s); got != tc.want {
				t.Errorf("sockets %s, want %s", got, tc.want)
			}
			if tc.extra != nil && len(s.HTTP3) != 0 {
				t.Errorf("HTTP/3 ports %v beside a UDP listener on the port", s.HTTP3)
			}
		})
	}
}

func TestVIPServiceHTTP3Port(t *testing.T) {
	gw := &gwapiv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}
	ports := map[PortKey]int32{{Port: 80, Protocol: corev1.ProtocolTCP}: 20000, {Port: 443, Protocol: corev1.ProtocolTCP}: 20001}
	svc := vipService(gw, Metadata{}, corev1.ServiceTypeClusterIP, ports, []int32{443}, "")
	var got []string
	for _, p := range svc.Spec.Ports {
		got = append(got, fmt.Sprintf("%s %d/%s->%s", p.Name, p.Port, p.Protocol, p.TargetPort.String()))
	}
	want := []string{"tcp-80 80/TCP->20000", "tcp-443 443/TCP->20001", "udp-443 443/UDP->20001"}
	if !slices.Equal(got, want) {
		t.Errorf("ports %v, want %v", got, want)
	}
	// Read back after a restart, the HTTP/3 port holds no port of its own: the TCP socket's stays.
	a := newPortAllocator(DefaultPortRange)
	a.seed(nnOf(gw), svc)
	out, err := a.allocate(nnOf(gw), []PortKey{{Port: 80, Protocol: corev1.ProtocolTCP}, {Port: 443, Protocol: corev1.ProtocolTCP}})
	if err != nil || out[PortKey{Port: 443, Protocol: corev1.ProtocolTCP}] != 20001 || a.holder[20001] != nnOf(gw) {
		t.Errorf("allocation after seeding %v (%v), holder of 20001 %v", out, err, a.holder[20001])
	}
}

func nnOf(gw *gwapiv1.Gateway) types.NamespacedName {
	return types.NamespacedName{Namespace: gw.Namespace, Name: gw.Name}
}
