package translator

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	httptranslate "github.com/coxswain-labs/coxswain/modules/httproute/translate"
)

// fakeACME is an ACME client's state as the translator reads it.
type fakeACME struct {
	states map[string]ACMEState // by hostname
	chs    []*irv1.ACMEChallenge
}

func (f *fakeACME) State(_, host string) ACMEState    { return f.states[host] }
func (f *fakeACME) Challenges() []*irv1.ACMEChallenge { return f.chs }

// TestACMEListeners: an HTTPS listener without certificateRefs on a Gateway that names an ACME
// issuer is bound without a certificate (TLS-ALPN-01 is answered there) and Programmed=False
// Pending until the ACME client has one, then served with it; a failed attempt is a Problem; a
// wildcard without a DNS provider is not accepted; the challenges ride the snapshot.
func TestACMEListeners(t *testing.T) {
	cert, key := selfSignedCA(t, "done.example", false)
	host := func(h string) *gwapiv1.Hostname { v := gwapiv1.Hostname(h); return &v }
	https := func(name string, port int32, h string) gwapiv1.Listener {
		return gwapiv1.Listener{Name: gwapiv1.SectionName(name), Port: gwapiv1.PortNumber(port), Protocol: gwapiv1.HTTPSProtocolType, Hostname: host(h)}
	}
	gw := &gwapiv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gw", Generation: 1,
		Annotations: map[string]string{ACMEDirectoryAnnotation: "https://ca.example/dir", ACMEEmailAnnotation: "ops@example"}},
		Spec: gwapiv1.GatewaySpec{GatewayClassName: "c", Listeners: []gwapiv1.Listener{
			{Name: "http", Port: 80, Protocol: gwapiv1.HTTPProtocolType},
			https("done", 443, "done.example"), https("waiting", 8443, "waiting.example"), https("failing", 9443, "failing.example"),
			https("wild", 7443, "*.wild.example"),
		}}}
	store := &Store{
		GatewayClasses: []*gwapiv1.GatewayClass{{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: gwapiv1.GatewayClassSpec{ControllerName: DefaultControllerName}}},
		Gateways:       []*gwapiv1.Gateway{gw},
	}
	ch := &irv1.ACMEChallenge{Type: irv1.ACMEChallenge_HTTP_01, Hostname: "waiting.example", Token: "tok", KeyAuthorization: "tok.thumb"}
	src := &fakeACME{states: map[string]ACMEState{
		"done.example":    {Certificate: cert, PrivateKey: key},
		"failing.example": {Error: "urn:ietf:params:acme:error:rejectedIdentifier"},
	}, chs: []*irv1.ACMEChallenge{ch}}
	res := Translate(context.Background(), store, Options{Registry: core.NewRegistry(httptranslate.Kind{}), ACME: src})
	st := res.Gateways[nn("ns", "gw")]
	cond := func(listener, typ string) *metav1.Condition {
		for _, ls := range st.Listeners {
			if string(ls.Name) == listener {
				return meta.FindStatusCondition(ls.Conditions, typ)
			}
		}
		t.Fatalf("no listener %s", listener)
		return nil
	}
	for _, tc := range []struct {
		listener, programmed, accepted, mentions string
		port                                     uint32
		certs                                    int // in the snapshot; -1: not bound
	}{
		{"done", "Programmed", "Accepted", "", 443, 1},
		{"waiting", "Pending", "Accepted", "waiting for the certificate for waiting.example from https://ca.example/dir", 8443, 0},
		{"failing", "Pending", "Accepted", "rejectedIdentifier", 9443, 0},
		{"wild", "Invalid", "UnsupportedValue", "DNS-01", 7443, -1},
	} {
		t.Run(tc.listener, func(t *testing.T) {
			prog, acc := cond(tc.listener, "Programmed"), cond(tc.listener, "Accepted")
			if prog.Reason != tc.programmed || acc.Reason != tc.accepted {
				t.Errorf("Programmed %s, Accepted %s (%s / %s), want %s, %s", prog.Reason, acc.Reason, prog.Message, acc.Message, tc.programmed, tc.accepted)
			}
			if !strings.Contains(prog.Message+acc.Message, tc.mentions) {
				t.Errorf("messages %q / %q do not mention %q", prog.Message, acc.Message, tc.mentions)
			}
			var srv *irv1.Server
			for _, l := range res.Snapshot.GetListeners() {
				if l.GetPort() == tc.port {
					srv = l.GetServers()[0]
				}
			}
			switch {
			case tc.certs < 0 && srv != nil:
				t.Errorf("listener bound: %v", srv)
			case tc.certs >= 0 && (srv == nil || srv.GetTls() == nil):
				t.Fatalf("listener not bound with TLS: %v", srv)
			case tc.certs >= 0 && len(srv.GetTls().GetCertificates()) != tc.certs:
				t.Errorf("certificates %v, want %d", srv.GetTls().GetCertificates(), tc.certs)
			case tc.certs == 0 && len(srv.GetVirtualHosts()) != 0:
				t.Errorf("a listener without its certificate carries routes: %v", srv.GetVirtualHosts())
			}
		})
	}
	if got := res.Snapshot.GetAcmeChallenges(); len(got) != 1 || got[0].GetToken() != "tok" {
		t.Errorf("challenges %v, want the one of the ACME client", got)
	}
	var orders []string
	for _, o := range res.ACME {
		orders = append(orders, o.Hostname)
	}
	if strings.Join(orders, ",") != "done.example,failing.example,waiting.example" {
		t.Errorf("orders %v", orders)
	}
	failing := false
	for _, p := range res.Problems {
		failing = failing || strings.Contains(p.Message, "rejectedIdentifier")
	}
	if !failing {
		t.Errorf("no problem reports the failed attempt: %v", res.Problems)
	}
}
