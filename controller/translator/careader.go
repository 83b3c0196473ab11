package translator

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// CACertificateKey is the ConfigMap key a CA bundle is read from (Gateway API caCertificateRefs).
const CACertificateKey = "ca.crt"

// caSource is one caCertificateRef, of a Gateway's client validation or of a BackendTLSPolicy, once
// its namespace is settled. Both resolve through readCA, so a CA source works the same in both
// places; each maps the faults to its own condition reasons.
type caSource struct {
	group, kind, name string
	ns                string // the namespace a namespaced kind is read from
	nsSet             bool   // the reference names a namespace, which a cluster-scoped kind must not
	secrets           bool   // Secrets (key ca.crt) are a CA source here too
}

// caProblem says why a caCertificateRef yields no CA.
type caProblem int

const (
	caInvalid   caProblem = iota + 1 // missing object or key, or PEM without a certificate that parses
	caWrongKind                      // not a kind that holds CA certificates
)

// readCA reads the PEM CA certificates r names: the ca.crt key of a ConfigMap (or of a Secret
// where r.secrets), or a ClusterTrustBundle's trustBundle. It checks that at least one
// certificate parses, so a bad bundle becomes a condition instead of a proxy nack.
func (t *session) readCA(r caSource) ([]byte, caProblem, error) {
	var data []byte
	var what string
	switch {
	case r.group == "" && r.kind == "ConfigMap":
		what = fmt.Sprintf("ConfigMap %s/%s", r.ns, r.name)
		cm := t.configMap(nn(r.ns, r.name))
		if cm == nil {
			return nil, caInvalid, fmt.Errorf("%s does not exist", what)
		}
		if s, ok := cm.Data[CACertificateKey]; ok {
			data = []byte(s)
		} else if data, ok = cm.BinaryData[CACertificateKey]; !ok {
			return nil, caInvalid, fmt.Errorf("%s has no key %s", what, CACertificateKey)
		}
	case r.group == "" && r.kind == "Secret" && r.secrets:
		what = fmt.Sprintf("Secret %s/%s", r.ns, r.name)
		sec := t.secrets[nn(r.ns, r.name)]
		if sec == nil {
			return nil, caInvalid, fmt.Errorf("%s does not exist (or is not of type %s, the only Secrets watched)", what, corev1.SecretTypeTLS)
		}
		if data = secretData(sec, CACertificateKey); data == nil {
			return nil, caInvalid, fmt.Errorf("%s has no key %s", what, CACertificateKey)
		}
	case r.group == certificatesv1.GroupName && r.kind == "ClusterTrustBundle":
		what = "ClusterTrustBundle " + r.name
		if r.nsSet {
			return nil, caInvalid, fmt.Errorf("%s is cluster-scoped: namespace must be unset", what)
		}
		ctb := t.clusterTrustBundle(r.name)
		if ctb == nil {
			return nil, caInvalid, fmt.Errorf("%s does not exist", what)
		}
		data = []byte(ctb.Spec.TrustBundle)
	default:
		kinds := []string{"ConfigMaps (key " + CACertificateKey + ")", "ClusterTrustBundles (group " + certificatesv1.GroupName + ")"}
		if r.secrets {
			kinds = []string{"ConfigMaps and Secrets (key " + CACertificateKey + ")", kinds[1]}
		}
		return nil, caWrongKind, fmt.Errorf("%s %s: only %s hold CA certificates", groupKind(r.group, r.kind), r.name, strings.Join(kinds, " and "))
	}
	if err := checkCABundle(data); err != nil {
		return nil, caInvalid, fmt.Errorf("%s: %w", what, err)
	}
	return data, 0, nil
}

// checkCABundle accepts PEM that holds at least one certificate and no certificate that fails to
// parse.
func checkCABundle(b []byte) error {
	n := 0
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return fmt.Errorf("certificate %d does not parse: %w", n+1, err)
		}
		n++
	}
	if n == 0 {
		return fmt.Errorf("no PEM certificate in %s", CACertificateKey)
	}
	return nil
}

// configMap and clusterTrustBundle look up the store, indexing it on first use: most
// translations name no CA at all.
func (t *session) configMap(k types.NamespacedName) *corev1.ConfigMap {
	if t.configMaps == nil {
		t.configMaps = map[types.NamespacedName]*corev1.ConfigMap{}
		for _, cm := range t.store.ConfigMaps {
			t.configMaps[nn(cm.Namespace, cm.Name)] = cm
		}
	}
	return t.configMaps[k]
}

func (t *session) clusterTrustBundle(name string) *certificatesv1.ClusterTrustBundle {
	if t.trustBundles == nil {
		t.trustBundles = map[string]*certificatesv1.ClusterTrustBundle{}
		for _, b := range t.store.ClusterTrustBundles {
			t.trustBundles[b.Name] = b
		}
	}
	return t.trustBundles[name]
}

// caListenerReasons and caPolicyReasons name a caProblem in a listener's and a BackendTLSPolicy's
// conditions.
var (
	caListenerReasons = map[caProblem]gwapiv1.ListenerConditionReason{
		caInvalid: gwapiv1.ListenerReasonInvalidCACertificateRef, caWrongKind: gwapiv1.ListenerReasonInvalidCACertificateKind}
	caPolicyReasons = map[caProblem]gwapiv1.PolicyConditionReason{
		caInvalid: gwapiv1.BackendTLSPolicyReasonInvalidCACertificateRef, caWrongKind: gwapiv1.BackendTLSPolicyReasonInvalidKind}
)
