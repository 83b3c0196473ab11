package translator

import (
	"crypto/tls"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// listenerTLS validates the listener's tls block and resolves its certificateRefs. Only
// terminating listeners (HTTPS, TLS in Terminate mode) need certificates; a certificate the
// proxy could not load is caught here, so it becomes a condition instead of a proxy nack.
func (t *session) listenerTLS(l *listenerState) {
	spec := l.spec
	switch spec.Protocol {
	case gwapiv1.HTTPSProtocolType, gwapiv1.TLSProtocolType:
	default:
		if spec.TLS != nil {
			t.rejectListener(l, "tls", gwapiv1.ListenerReasonUnsupportedValue,
				fmt.Sprintf("tls must not be set on a %s listener", spec.Protocol))
		}
		return
	}
	noRefs := spec.TLS == nil || len(spec.TLS.CertificateRefs) == 0
	if noRefs && spec.Protocol == gwapiv1.HTTPSProtocolType && (spec.TLS == nil || spec.TLS.Mode == nil || *spec.TLS.Mode == gwapiv1.TLSModeTerminate) && t.listenerACME(l) {
		return
	}
	if spec.TLS == nil {
		t.unresolvedListener(l, "tls", gwapiv1.ListenerReasonInvalidCertificateRef, "listener has no tls certificateRefs")
		return
	}
	mode := gwapiv1.TLSModeTerminate
	if spec.TLS.Mode != nil && *spec.TLS.Mode != "" {
		mode = *spec.TLS.Mode
	}
	switch {
	case mode == gwapiv1.TLSModePassthrough && spec.Protocol == gwapiv1.HTTPSProtocolType:
		t.rejectListener(l, "tls.mode", gwapiv1.ListenerReasonUnsupportedValue, "tls mode must be Terminate for protocol HTTPS")
		return
	case mode == gwapiv1.TLSModePassthrough:
		l.passthrough = true
		return
	case mode != gwapiv1.TLSModeTerminate:
		t.rejectListener(l, "tls.mode", gwapiv1.ListenerReasonUnsupportedValue, fmt.Sprintf("unknown tls mode %q", mode))
		return
	}
	if len(spec.TLS.CertificateRefs) == 0 {
		t.unresolvedListener(l, "tls.certificateRefs", gwapiv1.ListenerReasonInvalidCertificateRef, "listener has no certificateRefs")
		return
	}
	for i, ref := range spec.TLS.CertificateRefs {
		field := fmt.Sprintf("tls.certificateRefs[%d]", i)
		name, reason, err := t.resolveCertificate(l, ref)
		if err != nil {
			t.unresolvedListener(l, field, reason, err.Error())
			continue
		}
		l.certs = append(l.certs, name)
	}
}

// resolveCertificate checks one certificateRef and records its key pair, returning its IR name.
// A ListenerSet listener's references are the ListenerSet's: its namespace, its ReferenceGrants.
func (t *session) resolveCertificate(l *listenerState, ref gwapiv1.SecretObjectReference) (string, gwapiv1.ListenerConditionReason, error) {
	from, fromNS := "Gateway", l.gw.key.Namespace
	if l.owner != nil {
		from, fromNS = listenerSetKind, l.owner.key.Namespace
	}
	group, kind := "", "Secret"
	if ref.Group != nil {
		group = string(*ref.Group)
	}
	if ref.Kind != nil {
		kind = string(*ref.Kind)
	}
	ns := fromNS
	if ref.Namespace != nil && *ref.Namespace != "" {
		ns = string(*ref.Namespace)
	}
	if group != "" || kind != "Secret" {
		return "", gwapiv1.ListenerReasonInvalidCertificateRef,
			fmt.Errorf("certificateRef to %s %s/%s: only core Secrets are supported", groupKind(group, kind), ns, ref.Name)
	}
	if ns != fromNS && !t.granted(gwapiv1.GroupName, from, fromNS, "", "Secret", ns, string(ref.Name)) {
		return "", gwapiv1.ListenerReasonRefNotPermitted,
			fmt.Errorf("certificateRef to Secret %s/%s is not permitted by any ReferenceGrant", ns, ref.Name)
	}
	name := ns + "/" + string(ref.Name)
	if _, ok := t.secretsOut[name]; ok {
		return name, "", nil
	}
	sec := t.secrets[nn(ns, string(ref.Name))]
	if sec == nil {
		return "", gwapiv1.ListenerReasonInvalidCertificateRef, fmt.Errorf("Secret %s does not exist", name)
	}
	if sec.Type != corev1.SecretTypeTLS {
		return "", gwapiv1.ListenerReasonInvalidCertificateRef,
			fmt.Errorf("Secret %s has type %q, want %q", name, sec.Type, corev1.SecretTypeTLS)
	}
	cert, key := secretData(sec, corev1.TLSCertKey), secretData(sec, corev1.TLSPrivateKeyKey)
	if _, err := tls.X509KeyPair(cert, key); err != nil {
		return "", gwapiv1.ListenerReasonInvalidCertificateRef, fmt.Errorf("Secret %s: invalid key pair: %w", name, err)
	}
	t.secretsOut[name] = &irv1.Secret{Name: name, CertificatePem: cert, PrivateKeyPem: key}
	return name, "", nil
}

// secretData reads key from data, falling back to stringData: a Secret read from a file has not
// been through the API server, which folds stringData into data.
func secretData(sec *corev1.Secret, key string) []byte {
	if b, ok := sec.Data[key]; ok {
		return b
	}
	if s, ok := sec.StringData[key]; ok {
		return []byte(s)
	}
	return nil
}

func groupKind(group, kind string) string {
	if group == "" {
		return kind
	}
	return kind + "." + group
}
