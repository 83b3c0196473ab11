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

	"google.golang.org/protobuf/proto"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapiv1b1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// selfSigned is a PEM certificate and key, good as a CA bundle and as a client key pair.
func selfSigned(t *testing.T, cn string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

func tlsPolicy(name string, age int, caKind, caName string, targets ...string) *gwapiv1.BackendTLSPolicy {
	p := &gwapiv1.BackendTLSPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: name, Generation: 2, CreationTimestamp: metav1.NewTime(time.Unix(int64(1000+age), 0))},
		Spec:       gwapiv1.BackendTLSPolicySpec{Validation: gwapiv1.BackendTLSPolicyValidation{Hostname: "pg.example.com"}},
	}
	if caKind != "" {
		p.Spec.Validation.CACertificateRefs = []gwapiv1.LocalObjectReference{{Kind: gwapiv1.Kind(caKind), Name: gwapiv1.ObjectName(caName)}}
		if caKind == "ClusterTrustBundle" {
			p.Spec.Validation.CACertificateRefs[0].Group = certificatesv1.GroupName
		}
	}
	for _, tg := range targets {
		ref := gwapiv1.LocalPolicyTargetReferenceWithSectionName{LocalPolicyTargetReference: gwapiv1.LocalPolicyTargetReference{Kind: "Service"}}
		svc, section, _ := strings.Cut(tg, "#")
		ref.Name = gwapiv1.ObjectName(svc)
		if section != "" {
			ref.SectionName = ptrTo(gwapiv1.SectionName(section))
		}
		p.Spec.TargetRefs = append(p.Spec.TargetRefs, ref)
	}
	return p
}

func trustBundle(name string, pemBytes []byte) *certificatesv1.ClusterTrustBundle {
	return &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certificatesv1.ClusterTrustBundleSpec{TrustBundle: string(pemBytes)}}
}

func caConfigMap(name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: name}, Data: data}
}

// tlsStore is tcpStore whose Service port is named "pg" (what a sectionName names).
func tlsStore(t *testing.T) (*Store, []byte) {
	ca, _ := selfSigned(t, "ca")
	s := tcpStore()
	s.Services[0].Spec.Ports[0].Name = "pg"
	s.EndpointSlices[0].Ports[0].Name = ptrTo("pg")
	s.Add(streamGVK.GroupKind(), pgRoute())
	s.ConfigMaps = []*corev1.ConfigMap{caConfigMap("ca", map[string]string{"ca.crt": string(ca)}),
		caConfigMap("empty", map[string]string{}), caConfigMap("junk", map[string]string{"ca.crt": "not a certificate"})}
	s.ClusterTrustBundles = []*certificatesv1.ClusterTrustBundle{trustBundle("junk", []byte("not a certificate"))}
	return s, ca
}

func translateTLS(t *testing.T, s *Store) *Result {
	t.Helper()
	return Translate(context.Background(), s, Options{Registry: core.NewRegistry(extKind{})})
}

type ancestorConds struct{ accepted, acceptedReason, resolved, resolvedReason string }

func tlsAncestor(t *testing.T, res *Result, pol string) ancestorConds {
	t.Helper()
	st := res.Policies[PolicyKey{Group: gwapiv1.GroupName, Kind: BackendTLSPolicyKind, Namespace: "db", Name: pol}]
	if st == nil || len(st.Ancestors) != 1 {
		t.Fatalf("%s: status %+v, want one ancestor (the Gateway)", pol, st)
	}
	a := st.Ancestors[0]
	if *a.AncestorRef.Kind != "Gateway" || a.AncestorRef.Name != "gw" || *a.AncestorRef.Namespace != "db" || len(a.Conditions) != 2 {
		t.Fatalf("%s: ancestor %+v", pol, a)
	}
	for _, c := range a.Conditions {
		if c.ObservedGeneration != 2 {
			t.Errorf("%s: %s observedGeneration %d", pol, c.Type, c.ObservedGeneration)
		}
	}
	return ancestorConds{string(a.Conditions[0].Status), a.Conditions[0].Reason, string(a.Conditions[1].Status), a.Conditions[1].Reason}
}

func TestBackendTLSPolicy(t *testing.T) {
	t.Run("a valid policy makes the cluster TLS", func(t *testing.T) {
		s, ca := tlsStore(t)
		p := tlsPolicy("pg", 0, "ConfigMap", "ca", "pg#pg")
		p.Spec.Validation.SubjectAltNames = []gwapiv1.SubjectAltName{{Type: gwapiv1.HostnameSubjectAltNameType, Hostname: "a.example.com"},
			{Type: gwapiv1.URISubjectAltNameType, URI: "spiffe://td/ns/db/sa/pg"}}
		s.BackendTLSPolicies = []*gwapiv1.BackendTLSPolicy{p}
		res := translateTLS(t, s)
		want := &irv1.UpstreamTLS{ServerName: "pg.example.com", CaPem: ca, SubjectAltNames: []*irv1.SubjectAltName{
			{Type: irv1.SubjectAltName_HOSTNAME, Value: "a.example.com"}, {Type: irv1.SubjectAltName_URI, Value: "spiffe://td/ns/db/sa/pg"}}}
		if c := res.Snapshot.Clusters[0]; c.Name != "db/pg:5432" || !proto.Equal(c.Tls, want) {
			t.Fatalf("cluster %v, want TLS %v", c, want)
		}
		if got := tlsAncestor(t, res, "pg"); got != (ancestorConds{"True", "Accepted", "True", "ResolvedRefs"}) {
			t.Errorf("conditions %+v", got)
		}
	})
	t.Run("a ClusterTrustBundle CA, beside a ConfigMap's", func(t *testing.T) {
		s, ca := tlsStore(t)
		ca2, _ := selfSigned(t, "ca2")
		s.ClusterTrustBundles = append(s.ClusterTrustBundles, trustBundle("bundle", ca2))
		p := tlsPolicy("pg", 0, "ClusterTrustBundle", "bundle", "pg")
		s.BackendTLSPolicies = []*gwapiv1.BackendTLSPolicy{p}
		res := translateTLS(t, s)
		if got := res.Snapshot.Clusters[0].GetTls().GetCaPem(); string(got) != string(ca2) {
			t.Fatalf("cluster CA %q, want the bundle's", got)
		}
		if got := tlsAncestor(t, res, "pg"); got != (ancestorConds{"True", "Accepted", "True", "ResolvedRefs"}) {
			t.Errorf("conditions %+v", got)
		}
		p.Spec.Validation.CACertificateRefs = append(p.Spec.Validation.CACertificateRefs,
			gwapiv1.LocalObjectReference{Kind: "ConfigMap", Name: "ca"},
			gwapiv1.LocalObjectReference{Kind: "ClusterTrustBundle", Name: "bundle"}) // no group: not the certificates.k8s.io kind
		res = translateTLS(t, s)
		if got := res.Snapshot.Clusters[0].GetTls().GetCaPem(); string(got) != string(ca2)+string(ca) {
			t.Fatalf("cluster CA %q, want both bundles", got)
		}
		if got := tlsAncestor(t, res, "pg"); got != (ancestorConds{"True", "Accepted", "False", "InvalidKind"}) {
			t.Errorf("conditions %+v", got)
		}
	})
	t.Run("system roots", func(t *testing.T) {
		s, _ := tlsStore(t)
		p := tlsPolicy("pg", 0, "", "", "pg")
		p.Spec.Validation.WellKnownCACertificates = ptrTo(gwapiv1.WellKnownCACertificatesSystem)
		s.BackendTLSPolicies = []*gwapiv1.BackendTLSPolicy{p}
		res := translateTLS(t, s)
		if c := res.Snapshot.Clusters[0]; !c.GetTls().GetSystemRoots() || c.GetTls().GetCaPem() != nil {
			t.Fatalf("cluster TLS %v", c.GetTls())
		}
	})
	for _, tc := range []struct {
		name, kind, cm string
		want           ancestorConds
	}{
		{"missing ConfigMap", "ConfigMap", "gone", ancestorConds{"False", "NoValidCACertificate", "False", "InvalidCACertificateRef"}},
		{"ConfigMap without ca.crt", "ConfigMap", "empty", ancestorConds{"False", "NoValidCACertificate", "False", "InvalidCACertificateRef"}},
		{"ConfigMap with junk", "ConfigMap", "junk", ancestorConds{"False", "NoValidCACertificate", "False", "InvalidCACertificateRef"}},
		{"unsupported kind", "Pod", "ca", ancestorConds{"False", "NoValidCACertificate", "False", "InvalidKind"}},
		{"missing ClusterTrustBundle", "ClusterTrustBundle", "gone", ancestorConds{"False", "NoValidCACertificate", "False", "InvalidCACertificateRef"}},
		{"ClusterTrustBundle with junk", "ClusterTrustBundle", "junk", ancestorConds{"False", "NoValidCACertificate", "False", "InvalidCACertificateRef"}},
	} {
		t.Run(tc.name+" trusts nothing", func(t *testing.T) {
			s, _ := tlsStore(t)
			s.BackendTLSPolicies = []*gwapiv1.BackendTLSPolicy{tlsPolicy("pg", 0, tc.kind, tc.cm, "pg")}
			res := translateTLS(t, s)
			if got := tlsAncestor(t, res, "pg"); got != tc.want {
				t.Errorf("conditions %+v, want %+v", got, tc.want)
			}
			// Still TLS (never cleartext), with nothing to verify against: every connection fails.
			if c := res.Snapshot.Clusters[0]; c.GetTls() == nil || c.GetTls().GetCaPem() != nil || c.GetTls().GetSystemRoots() {
				t.Errorf("cluster TLS %v", c.GetTls())
			}
		})
	}
	t.Run("conflicts: the oldest wins, a port's policy beside the Service's does not conflict", func(t *testing.T) {
		s, _ := tlsStore(t)
		older, newer := tlsPolicy("z-older", 0, "ConfigMap", "ca", "pg"), tlsPolicy("a-newer", 5, "ConfigMap", "ca", "pg")
		port := tlsPolicy("port", 9, "ConfigMap", "ca", "pg#pg")
		port.Spec.Validation.Hostname = "port.example.com"
		s.BackendTLSPolicies = []*gwapiv1.BackendTLSPolicy{newer, port, older}
		res := translateTLS(t, s)
		if got := tlsAncestor(t, res, "z-older"); got.accepted != "True" {
			t.Errorf("older: %+v", got)
		}
		if got := tlsAncestor(t, res, "a-newer"); got.accepted != "False" || got.acceptedReason != "Conflicted" {
			t.Errorf("newer: %+v", got)
		}
		if got := tlsAncestor(t, res, "port"); got.accepted != "True" {
			t.Errorf("port: %+v", got)
		}
		if sn := res.Snapshot.Clusters[0].GetTls().GetServerName(); sn != "port.example.com" {
			t.Errorf("the port's policy applies to the port: server name %q", sn)
		}
	})
}

func TestGatewayBackendClientCertificate(t *testing.T) {
	cert, key := selfSigned(t, "gateway-client")
	withRef := func(s *Store, ns string) {
		ref := gwapiv1.SecretObjectReference{Name: "client"}
		if ns != "" {
			ref.Namespace = ptrTo(gwapiv1.Namespace(ns))
		}
		s.Gateways[0].Spec.TLS = &gwapiv1.GatewayTLSConfig{Backend: &gwapiv1.GatewayBackendTLS{ClientCertificateRef: &ref}}
	}
	secret := func(ns string, typ corev1.SecretType) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "client"}, Type: typ,
			Data: map[string][]byte{"tls.crt": cert, "tls.key": key}}
	}
	resolvedRefs := func(res *Result) metav1.Condition {
		for _, c := range res.Gateways[nn("db", "gw")].Conditions {
			if c.Type == "ResolvedRefs" {
				return c
			}
		}
		t.Fatal("no ResolvedRefs on the Gateway")
		return metav1.Condition{}
	}
	t.Run("presented to the TLS backends", func(t *testing.T) {
		s, _ := tlsStore(t)
		withRef(s, "")
		s.Secrets = []*corev1.Secret{secret("db", corev1.SecretTypeTLS)}
		s.BackendTLSPolicies = []*gwapiv1.BackendTLSPolicy{tlsPolicy("pg", 0, "ConfigMap", "ca", "pg")}
		res := translateTLS(t, s)
		c := res.Snapshot.Clusters[0]
		if c.Name != "db/pg:5432/client=db/gw" || c.GetTls().GetClientCertificate() != "db/client" {
			t.Fatalf("cluster %s TLS %v", c.Name, c.GetTls())
		}
		if len(res.Snapshot.Secrets) != 1 || res.Snapshot.Secrets[0].Name != "db/client" {
			t.Fatalf("secrets %v", res.Snapshot.Secrets)
		}
		if rr := resolvedRefs(res); rr.Status != metav1.ConditionTrue {
			t.Errorf("ResolvedRefs %+v", rr)
		}
		// The endpoints fast path finds the Service port behind the suffixed name.
		es := s.EndpointSlices[0].DeepCopy()
		es.Endpoints[0].Addresses = []string{"10.0.0.9"}
		s.EndpointSlices[0] = es
		got := RefreshEndpoints(context.Background(), res.Snapshot, s, Options{Registry: core.NewRegistry(extKind{})})
		if eps := got.Clusters[0].GetEndpoints(); len(eps) != 1 || eps[0].Address != "10.0.0.9" {
			t.Errorf("fast path endpoints %v", eps)
		}
	})
	t.Run("not to cleartext backends", func(t *testing.T) {
		s, _ := tlsStore(t)
		withRef(s, "")
		s.Secrets = []*corev1.Secret{secret("db", corev1.SecretTypeTLS)}
		res := translateTLS(t, s)
		if c := res.Snapshot.Clusters[0]; c.Name != "db/pg:5432" || c.Tls != nil {
			t.Fatalf("cluster %s TLS %v", c.Name, c.Tls)
		}
	})
	for _, tc := range []struct {
		name   string
		setup  func(s *Store)
		reason string
	}{
		{"missing Secret", func(s *Store) { withRef(s, "") }, "InvalidClientCertificateRef"},
		{"Opaque Secret", func(s *Store) {
			withRef(s, "")
			s.Secrets = []*corev1.Secret{secret("db", corev1.SecretTypeOpaque)}
		}, "InvalidClientCertificateRef"},
		{"another namespace without a grant", func(s *Store) {
			withRef(s, "certs")
			s.Secrets = []*corev1.Secret{secret("certs", corev1.SecretTypeTLS)}
		}, "RefNotPermitted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := tlsStore(t)
			tc.setup(s)
			s.BackendTLSPolicies = []*gwapiv1.BackendTLSPolicy{tlsPolicy("pg", 0, "ConfigMap", "ca", "pg")}
			res := translateTLS(t, s)
			if rr := resolvedRefs(res); rr.Status != metav1.ConditionFalse || rr.Reason != tc.reason {
				t.Errorf("ResolvedRefs %+v, want False %s", rr, tc.reason)
			}
			if c := res.Snapshot.Clusters[0]; c.GetTls() == nil || c.GetTls().GetClientCertificate() != "" {
				t.Errorf("cluster TLS %v: still TLS, without a client certificate", c.GetTls())
			}
		})
	}
	t.Run("another namespace with a grant", func(t *testing.T) {
		s, _ := tlsStore(t)
		withRef(s, "certs")
		s.Secrets = []*corev1.Secret{secret("certs", corev1.SecretTypeTLS)}
		s.ReferenceGrants = []*gwapiv1b1.ReferenceGrant{{ObjectMeta: metav1.ObjectMeta{Namespace: "certs", Name: "g"},
			Spec: gwapiv1b1.ReferenceGrantSpec{From: []gwapiv1b1.ReferenceGrantFrom{{Group: gwapiv1.GroupName, Kind: "Gateway", Namespace: "db"}},
				To: []gwapiv1b1.ReferenceGrantTo{{Kind: "Secret"}}}}}
		s.BackendTLSPolicies = []*gwapiv1.BackendTLSPolicy{tlsPolicy("pg", 0, "ConfigMap", "ca", "pg")}
		res := translateTLS(t, s)
		if c := res.Snapshot.Clusters[0]; c.GetTls().GetClientCertificate() != "certs/client" {
			t.Fatalf("cluster TLS %v", c.GetTls())
		}
	})
}
