package translator

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	policyv1a1 "github.com/coxswain-labs/coxswain/modules/api/policy/v1alpha1"
	httptranslate "github.com/coxswain-labs/coxswain/modules/httproute/translate"
)

// selfSigned returns a certificate and its key, PEM; ca makes it a CA.
func selfSignedCA(t *testing.T, cn string, ca bool) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, DNSNames: []string{cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: ca, BasicConstraintsValid: ca}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

func caRef(kind, name, ns string) gwapiv1.ObjectReference {
	r := gwapiv1.ObjectReference{Kind: gwapiv1.Kind(kind), Name: gwapiv1.ObjectName(name)}
	if kind == "ClusterTrustBundle" {
		r.Group = certificatesv1.GroupName
	}
	if ns != "" {
		r.Namespace = ptr.To(gwapiv1.Namespace(ns))
	}
	return r
}

func perPort(port int32, mode gwapiv1.FrontendValidationModeType, refs ...gwapiv1.ObjectReference) gwapiv1.TLSPortConfig {
	return gwapiv1.TLSPortConfig{Port: gwapiv1.PortNumber(port), TLS: gwapiv1.TLSConfig{
		Validation: &gwapiv1.FrontendTLSValidation{CACertificateRefs: refs, Mode: mode}}}
}

// TestFrontendValidation: the Gateway's default and per-port client certificate validation
// reach the HTTPS servers of the right ports; each bad caCertificateRef is a ResolvedRefs False
// reason of the spec, a listener left with none is not accepted and not served, and nothing else
// of the Gateway changes.
func TestFrontendValidation(t *testing.T) {
	ca, _ := selfSignedCA(t, "client CA", true)
	ca2, _ := selfSignedCA(t, "bundle CA", true)
	cert, key := selfSignedCA(t, "example.org", false)
	https := func(name string, port int32) gwapiv1.Listener {
		return gwapiv1.Listener{Name: gwapiv1.SectionName(name), Port: gwapiv1.PortNumber(port), Protocol: gwapiv1.HTTPSProtocolType,
			TLS: &gwapiv1.ListenerTLSConfig{CertificateRefs: []gwapiv1.SecretObjectReference{{Name: "cert"}}}}
	}
	gw := &gwapiv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gw", Generation: 1}, Spec: gwapiv1.GatewaySpec{
		GatewayClassName: "c",
		Listeners: []gwapiv1.Listener{https("https", 443), https("unresolved", 7443), https("kind", 8443), https("grant", 6443),
			https("partial", 5443), https("bundle", 9443), {Name: "http", Port: 80, Protocol: gwapiv1.HTTPProtocolType}},
		TLS: &gwapiv1.GatewayTLSConfig{Frontend: &gwapiv1.FrontendTLSConfig{
			Default: gwapiv1.TLSConfig{Validation: &gwapiv1.FrontendTLSValidation{CACertificateRefs: []gwapiv1.ObjectReference{caRef("ConfigMap", "ca", "")}}},
			PerPort: []gwapiv1.TLSPortConfig{
				perPort(7443, "", caRef("ConfigMap", "missing", "")),
				perPort(8443, "", caRef("Service", "svc", "")),
				perPort(6443, "", caRef("ConfigMap", "ca", "other")),
				perPort(5443, "", caRef("ConfigMap", "no-key", ""), caRef("ConfigMap", "ca", "")),
				perPort(9443, gwapiv1.AllowInsecureFallback, caRef("ClusterTrustBundle", "bundle", "")),
				perPort(80, "", caRef("ConfigMap", "missing", "")),
			},
		}},
	}}
	store := &Store{
		GatewayClasses: []*gwapiv1.GatewayClass{{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: gwapiv1.GatewayClassSpec{ControllerName: DefaultControllerName}}},
		Gateways:       []*gwapiv1.Gateway{gw},
		Secrets: []*corev1.Secret{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cert"}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{corev1.TLSCertKey: cert, corev1.TLSPrivateKeyKey: key}}},
		ConfigMaps: []*corev1.ConfigMap{
			{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ca"}, Data: map[string]string{"ca.crt": string(ca)}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "ca"}, Data: map[string]string{"ca.crt": string(ca)}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "no-key"}, Data: map[string]string{"tls.crt": string(ca)}},
		},
		ClusterTrustBundles: []*certificatesv1.ClusterTrustBundle{{ObjectMeta: metav1.ObjectMeta{Name: "bundle"},
			Spec: certificatesv1.ClusterTrustBundleSpec{TrustBundle: string(ca2)}}},
		ClientTrafficPolicies: []*policyv1a1.ClientTrafficPolicy{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "subject", Generation: 1},
			Spec: policyv1a1.ClientTrafficPolicySpec{TargetRefs: []gwapiv1.LocalPolicyTargetReferenceWithSectionName{gwRef("gw", "")},
				ClientCertificate: &policyv1a1.ClientCertificate{SubjectHeader: "X-Client-Subject"}}}},
	}
	res := Translate(context.Background(), store, Options{Registry: core.NewRegistry(httptranslate.Kind{})})
	st := res.Gateways[nn("ns", "gw")]
	if st == nil {
		t.Fatalf("no Gateway status; problems %v", res.Problems)
	}

	cases := []struct {
		listener string
		resolved gwapiv1.ListenerConditionReason // "" for True
		accepted gwapiv1.ListenerConditionReason // "" for True
		port     uint32
		ca       []byte // in the snapshot; nil: not served
		fallback bool
		mentions string // in the ResolvedRefs message
	}{
		{listener: "https", port: 443, ca: ca},
		{listener: "unresolved", resolved: gwapiv1.ListenerReasonInvalidCACertificateRef, accepted: gwapiv1.ListenerReasonNoValidCACertificate, port: 7443, mentions: "ConfigMap ns/missing does not exist"},
		{listener: "kind", resolved: gwapiv1.ListenerReasonInvalidCACertificateKind, accepted: gwapiv1.ListenerReasonNoValidCACertificate, port: 8443, mentions: "Service svc"},
		{listener: "grant", resolved: gwapiv1.ListenerReasonRefNotPermitted, accepted: gwapiv1.ListenerReasonNoValidCACertificate, port: 6443, mentions: "ReferenceGrant"},
		{listener: "partial", resolved: gwapiv1.ListenerReasonInvalidCACertificateRef, port: 5443, ca: ca, mentions: "has no key ca.crt"},
		{listener: "bundle", port: 9443, ca: ca2, fallback: true},
	}
	for _, tc := range cases {
		t.Run(tc.listener, func(t *testing.T) {
			var ls *gwapiv1.ListenerStatus
			for i := range st.Listeners {
				if string(st.Listeners[i].Name) == tc.listener {
					ls = &st.Listeners[i]
				}
			}
			rr := meta.FindStatusCondition(ls.Conditions, string(gwapiv1.ListenerConditionResolvedRefs))
			acc := meta.FindStatusCondition(ls.Conditions, string(gwapiv1.ListenerConditionAccepted))
			prog := meta.FindStatusCondition(ls.Conditions, string(gwapiv1.ListenerConditionProgrammed))
			if want := tc.resolved; (want == "") != (rr.Status == metav1.ConditionTrue) || (want != "" && rr.Reason != string(want)) {
				t.Errorf("ResolvedRefs %s %s (%s), want reason %q", rr.Status, rr.Reason, rr.Message, want)
			}
			if !strings.Contains(rr.Message, tc.mentions) {
				t.Errorf("ResolvedRefs message %q does not mention %q", rr.Message, tc.mentions)
			}
			if want := tc.accepted; (want == "") != (acc.Status == metav1.ConditionTrue) || (want != "" && acc.Reason != string(want)) {
				t.Errorf("Accepted %s %s (%s), want reason %q", acc.Status, acc.Reason, acc.Message, want)
			}
			if (tc.ca != nil) != (prog.Status == metav1.ConditionTrue) {
				t.Errorf("Programmed %s (%s)", prog.Status, prog.Message)
			}
			l := listenerByPort(res.Snapshot, tc.port)
			if tc.ca == nil {
				if l != nil {
					t.Fatalf("listener on %d is in the snapshot", tc.port)
				}
				return
			}
			cv := l.GetServers()[0].GetTls().GetClientValidation()
			if string(cv.GetCaPem()) != string(tc.ca) {
				t.Errorf("server CA bundle %q, want the referenced one", cv.GetCaPem())
			}
			if fb := cv.GetMode() == irv1.ClientValidation_ALLOW_INSECURE_FALLBACK; fb != tc.fallback {
				t.Errorf("mode %s, fallback want %v", cv.GetMode(), tc.fallback)
			}
			if cv.GetSubjectHeader() != "X-Client-Subject" {
				t.Errorf("subject header %q, want the ClientTrafficPolicy's", cv.GetSubjectHeader())
			}
		})
	}
	t.Run("the HTTP listener is untouched by a per-port entry of its port", func(t *testing.T) {
		l := listenerByPort(res.Snapshot, 80)
		if l == nil || l.GetServers()[0].GetTls() != nil {
			t.Fatalf("HTTP listener %v", l)
		}
	})
	t.Run("InsecureFrontendValidationMode", func(t *testing.T) {
		c := meta.FindStatusCondition(st.Conditions, string(gwapiv1.GatewayConditionInsecureFrontendValidationMode))
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != string(gwapiv1.GatewayReasonConfigurationChanged) {
			t.Fatalf("condition %+v, want True ConfigurationChanged", c)
		}
		gw.Spec.TLS.Frontend.PerPort[4].TLS.Validation.Mode = gwapiv1.AllowValidOnly
		defer func() { gw.Spec.TLS.Frontend.PerPort[4].TLS.Validation.Mode = gwapiv1.AllowInsecureFallback }()
		again := Translate(context.Background(), store, Options{Registry: core.NewRegistry(httptranslate.Kind{})})
		if c := meta.FindStatusCondition(again.Gateways[nn("ns", "gw")].Conditions, string(gwapiv1.GatewayConditionInsecureFrontendValidationMode)); c != nil {
			t.Fatalf("condition %+v stays after the mode went back to AllowValidOnly", c)
		}
	})
}
