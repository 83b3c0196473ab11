package translator

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	policyv1a1 "github.com/coxswain-labs/coxswain/modules/api/policy/v1alpha1"
	httptranslate "github.com/coxswain-labs/coxswain/modules/httproute/translate"
	udptranslate "github.com/coxswain-labs/coxswain/modules/udproute/translate"
)

// http3Store is one Gateway with an HTTPS listener on 443 (and an HTTP one on 80), a policy
// asking for HTTP/3 on the whole Gateway, and the extra listeners given.
func http3Store(t *testing.T, allow0RTT bool, more ...gwapiv1.Listener) *Store {
	t.Helper()
	cert, key := selfSignedCA(t, "example.org", false)
	listeners := append([]gwapiv1.Listener{
		{Name: "https", Port: 443, Protocol: gwapiv1.HTTPSProtocolType,
			TLS: &gwapiv1.ListenerTLSConfig{CertificateRefs: []gwapiv1.SecretObjectReference{{Name: "cert"}}}},
		{Name: "http", Port: 80, Protocol: gwapiv1.HTTPProtocolType},
	}, more...)
	return &Store{
		GatewayClasses: []*gwapiv1.GatewayClass{{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: gwapiv1.GatewayClassSpec{ControllerName: DefaultControllerName}}},
		Gateways: []*gwapiv1.Gateway{{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "gw", Generation: 1},
			Spec: gwapiv1.GatewaySpec{GatewayClassName: "c", Listeners: listeners}}},
		Secrets: []*corev1.Secret{{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "cert"}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{corev1.TLSCertKey: cert, corev1.TLSPrivateKeyKey: key}}},
		ClientTrafficPolicies: []*policyv1a1.ClientTrafficPolicy{ctp("h3", 0, policyv1a1.ClientTrafficPolicySpec{
			TargetRefs: []gwapiv1.LocalPolicyTargetReferenceWithSectionName{gwRef("gw", "")},
			HTTP3:      &policyv1a1.HTTP3Settings{Enabled: true, Allow0RTT: allow0RTT}})},
	}
}

func listenerCondition(t *testing.T, res *Result, listener, typ string) *metav1.Condition {
	t.Helper()
	st := res.Gateways[nn("db", "gw")]
	if st == nil {
		t.Fatalf("no Gateway status; problems %v", res.Problems)
	}
	for _, l := range st.Listeners {
		if string(l.Name) != listener {
			continue
		}
		for i := range l.Conditions {
			if l.Conditions[i].Type == typ {
				return &l.Conditions[i]
			}
		}
	}
	return nil
}

func TestClientTrafficPolicyHTTP3(t *testing.T) {
	reg := core.NewRegistry(httptranslate.Kind{}, udptranslate.Kind)

	t.Run("HTTPS listeners get HTTP/3; others ignore it", func(t *testing.T) {
		res := Translate(context.Background(), http3Store(t, true), Options{Registry: reg})
		h3 := listenerByPort(res.Snapshot, 443).GetHttp3()
		if h3 == nil || h3.GetAdvertisedPort() != 443 || !h3.GetAllow_0Rtt() {
			t.Errorf("HTTPS listener http3 %v, want advertised port 443 with 0-RTT", h3)
		}
		if h := listenerByPort(res.Snapshot, 80).GetHttp3(); h != nil {
			t.Errorf("HTTP listener http3 %v, want none", h)
		}
		if c := listenerCondition(t, res, "https", ListenerConditionHTTP3); c == nil || c.Status != metav1.ConditionTrue || c.Reason != ListenerReasonHTTP3Enabled {
			t.Errorf("HTTPS listener HTTP3 condition %+v, want True Enabled", c)
		}
		if c := listenerCondition(t, res, "http", ListenerConditionHTTP3); c != nil {
			t.Errorf("HTTP listener has an HTTP3 condition %+v", c)
		}
		c := accepted(t, res, "h3")
		if len(c) != 1 || c[0].Status != metav1.ConditionTrue || !strings.Contains(c[0].Message, "spec.http3 on HTTP listener http") {
			t.Errorf("Accepted %+v: want True naming the HTTP listener ignored", c)
		}
	})

	t.Run("0-RTT stays off unless asked", func(t *testing.T) {
		res := Translate(context.Background(), http3Store(t, false), Options{Registry: reg})
		if h3 := listenerByPort(res.Snapshot, 443).GetHttp3(); h3 == nil || h3.GetAllow_0Rtt() {
			t.Errorf("http3 %v, want served without 0-RTT", h3)
		}
	})

	t.Run("a UDP listener on the port keeps it", func(t *testing.T) {
		store := http3Store(t, false, gwapiv1.Listener{Name: "quic", Port: 443, Protocol: gwapiv1.UDPProtocolType})
		res := Translate(context.Background(), store, Options{Registry: reg})
		var udp, https *irv1.Listener
		for _, l := range res.Snapshot.GetListeners() {
			switch l.GetProtocol() {
			case "UDP":
				udp = l
			case "HTTPS":
				https = l
			}
		}
		if https == nil || https.GetHttp3() != nil {
			t.Errorf("HTTPS listener %v: want served, without http3", https)
		}
		if c := listenerCondition(t, res, "https", ListenerConditionHTTP3); c == nil || c.Status != metav1.ConditionFalse ||
			c.Reason != string(ListenerReasonUDPPortConflict) || !strings.Contains(c.Message, "db/gw/quic") {
			t.Errorf("HTTP3 condition %+v, want False UDPPortConflict naming db/gw/quic", c)
		}
		if c := listenerCondition(t, res, "https", string(gwapiv1.ListenerConditionProgrammed)); c == nil || c.Status != metav1.ConditionTrue {
			t.Errorf("HTTPS listener Programmed %+v, want True: it serves over TCP", c)
		}
		found := false
		for _, p := range res.Problems {
			found = found || (p.Reason == string(ListenerReasonUDPPortConflict) && p.Field == "spec.listeners[0]")
		}
		if !found {
			t.Errorf("no UDPPortConflict problem on spec.listeners[0]: %v", res.Problems)
		}
		c := accepted(t, res, "h3")
		if len(c) != 1 || !strings.Contains(c[0].Message, "not applied where HTTP/3 on listener https") {
			t.Errorf("Accepted %+v: want it to say where HTTP/3 was not applied", c)
		}
		if udp == nil || udp.GetPort() != 443 {
			t.Errorf("UDP listener %v: want it serving port 443", udp)
		}
	})

	t.Run("shared mode: the Gateway's UDP listener keeps the listener port", func(t *testing.T) {
		// Provisioned, the HTTPS and the UDP listener on 443 bind different internal ports, but
		// the VIP Service has one UDP 443, which the UDP listener keeps.
		store := http3Store(t, false, gwapiv1.Listener{Name: "quic", Port: 443, Protocol: gwapiv1.UDPProtocolType})
		ip := gwapiv1.IPAddressType
		prov := map[types.NamespacedName]*Provisioned{nn("db", "gw"): {InternalPorts: map[PortTransport]uint32{
			{Port: 443, Transport: "tcp"}: 20000, {Port: 80, Transport: "tcp"}: 20001, {Port: 443, Transport: "udp"}: 20002},
			Addresses: []gwapiv1.GatewayStatusAddress{{Type: &ip, Value: "10.96.0.10"}}}}
		res := Translate(context.Background(), store, Options{Registry: reg, Provisioned: prov})
		https := listenerByPort(res.Snapshot, 20000)
		if https == nil || https.GetHttp3() != nil {
			t.Errorf("HTTPS listener %v: want served on internal port 20000, without http3", https)
		}
		if c := listenerCondition(t, res, "https", ListenerConditionHTTP3); c == nil || c.Reason != string(ListenerReasonUDPPortConflict) {
			t.Errorf("HTTP3 condition %+v, want False UDPPortConflict", c)
		}
		// Without the UDP listener, HTTP/3 is served on the internal port and advertised as 443.
		res = Translate(context.Background(), http3Store(t, false), Options{Registry: reg, Provisioned: prov})
		if h3 := listenerByPort(res.Snapshot, 20000).GetHttp3(); h3 == nil || h3.GetAdvertisedPort() != 443 {
			t.Errorf("http3 %v, want served on the internal port, advertised as 443", h3)
		}
	})
}
