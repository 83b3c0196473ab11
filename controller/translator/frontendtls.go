package translator

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// CACertificateKey is the ConfigMap key a CA bundle is read from (Gateway API caCertificateRefs).
const CACertificateKey = "ca.crt"

// frontendValidation resolves the client certificate validation the Gateway asks of an HTTPS
// listener (spec.tls.frontend: the perPort entry of its port, else the default). Each bad
// caCertificateRef makes ResolvedRefs False and is left out; with none left the listener is not
// accepted (NoValidCACertificate), since serving it without the check would be less secure than
// configured. Other protocols are not concerned: the spec scopes the setting to HTTPS.
func (t *session) frontendValidation(l *listenerState) {
	fe := frontendTLS(l.gw.gw)
	if fe == nil || l.spec.Protocol != gwapiv1.HTTPSProtocolType || !l.accepted.ok {
		return
	}
	cfg, field := fe.Default, "spec.tls.frontend.default"
	for i, pp := range fe.PerPort {
		if pp.Port == l.spec.Port {
			cfg, field = pp.TLS, fmt.Sprintf("spec.tls.frontend.perPort[%d].tls", i)
			break
		}
	}
	v := cfg.Validation
	if v == nil {
		return
	}
	field += ".validation"
	var mode irv1.ClientValidation_Mode
	switch v.Mode {
	case "", gwapiv1.AllowValidOnly:
	case gwapiv1.AllowInsecureFallback:
		mode = irv1.ClientValidation_ALLOW_INSECURE_FALLBACK
	default:
		t.rejectListenerAt(l, field+".mode", gwapiv1.ListenerReasonUnsupportedValue,
			fmt.Sprintf("unknown validation mode %q (AllowValidOnly or AllowInsecureFallback)", v.Mode))
		return
	}
	var bundle []byte
	for i, ref := range v.CACertificateRefs {
		f := fmt.Sprintf("%s.caCertificateRefs[%d]", field, i)
		b, reason, err := t.resolveCACertificate(l.gw, ref)
		if err != nil {
			if l.resolved.ok {
				l.resolved = condState{reason: string(reason), msg: f + ": " + err.Error()}
			}
			t.gatewayProblem(l.gw, f, string(reason), err.Error())
			continue
		}
		bundle = append(bundle, b...)
	}
	if len(bundle) == 0 {
		t.rejectListenerAt(l, field+".caCertificateRefs", gwapiv1.ListenerReasonNoValidCACertificate,
			"no caCertificateRef resolves to a CA certificate: the listener would serve without the client certificate check it asks for")
		return
	}
	l.clientValidation = &irv1.ClientValidation{CaPem: bundle, Mode: mode}
}

func frontendTLS(gw *gwapiv1.Gateway) *gwapiv1.FrontendTLSConfig {
	if gw.Spec.TLS == nil {
		return nil
	}
	return gw.Spec.TLS.Frontend
}

// insecureFrontend reports whether any of the Gateway's validation settings allows insecure
// fallback (the InsecureFrontendValidationMode condition).
func insecureFrontend(gw *gwapiv1.Gateway) bool {
	fe := frontendTLS(gw)
	if fe == nil {
		return false
	}
	if v := fe.Default.Validation; v != nil && v.Mode == gwapiv1.AllowInsecureFallback {
		return true
	}
	for _, pp := range fe.PerPort {
		if v := pp.TLS.Validation; v != nil && v.Mode == gwapiv1.AllowInsecureFallback {
			return true
		}
	}
	return false
}

// rejectListenerAt is rejectListener for a field of the Gateway outside the listener.
func (t *session) rejectListenerAt(l *listenerState, field string, reason gwapiv1.ListenerConditionReason, msg string) {
	if l.accepted.ok {
		l.accepted = condState{reason: string(reason), msg: field + ": " + msg}
	}
	t.gatewayProblem(l.gw, field, string(reason), msg)
}

// resolveCACertificate reads the PEM CA certificates one caCertificateRef names: the ca.crt key
// of a ConfigMap (in another namespace only with a ReferenceGrant), or a ClusterTrustBundle's
// trustBundle. It checks that at least one certificate parses, so a bad bundle becomes a
// condition instead of a proxy nack.
func (t *session) resolveCACertificate(g *gatewayState, ref gwapiv1.ObjectReference) ([]byte, gwapiv1.ListenerConditionReason, error) {
	ns := g.key.Namespace
	if ref.Namespace != nil && *ref.Namespace != "" {
		ns = string(*ref.Namespace)
	}
	var data, what string
	switch {
	case ref.Group == "" && ref.Kind == "ConfigMap":
		what = fmt.Sprintf("ConfigMap %s/%s", ns, ref.Name)
		if ns != g.key.Namespace && !t.granted(gwapiv1.GroupName, "Gateway", g.key.Namespace, "", "ConfigMap", ns, string(ref.Name)) {
			return nil, gwapiv1.ListenerReasonRefNotPermitted, fmt.Errorf("%s is not permitted by any ReferenceGrant", what)
		}
		cm := t.configMap(nn(ns, string(ref.Name)))
		if cm == nil {
			return nil, gwapiv1.ListenerReasonInvalidCACertificateRef, fmt.Errorf("%s does not exist", what)
		}
		var ok bool
		if data, ok = cm.Data[CACertificateKey]; !ok {
			return nil, gwapiv1.ListenerReasonInvalidCACertificateRef, fmt.Errorf("%s has no key %s", what, CACertificateKey)
		}
	case ref.Group == certificatesv1.GroupName && ref.Kind == "ClusterTrustBundle":
		what = fmt.Sprintf("ClusterTrustBundle %s", ref.Name)
		if ref.Namespace != nil && *ref.Namespace != "" {
			return nil, gwapiv1.ListenerReasonInvalidCACertificateRef, fmt.Errorf("%s is cluster-scoped: namespace must be unset", what)
		}
		ctb := t.clusterTrustBundle(string(ref.Name))
		if ctb == nil {
			return nil, gwapiv1.ListenerReasonInvalidCACertificateRef, fmt.Errorf("%s does not exist", what)
		}
		data = ctb.Spec.TrustBundle
	default:
		return nil, gwapiv1.ListenerReasonInvalidCACertificateKind,
			fmt.Errorf("%s %s: only ConfigMaps (key %s) and ClusterTrustBundles (group %s) hold CA certificates",
				groupKind(string(ref.Group), string(ref.Kind)), ref.Name, CACertificateKey, certificatesv1.GroupName)
	}
	if err := checkCABundle([]byte(data)); err != nil {
		return nil, gwapiv1.ListenerReasonInvalidCACertificateRef, fmt.Errorf("%s: %w", what, err)
	}
	return []byte(data), "", nil
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
