package translator

import (
	"fmt"
	"strconv"

	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

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
	if l.gw.key.Namespace == translation.ImplicitNamespace {
		implicitClientValidation(l.gw.gw.Annotations, l.clientValidation)
	}
}

// implicitClientValidation adds what an implicit Gateway's annotations ask of its validation
// (translation.ImplicitVerifyDepthAnnotation, ImplicitCertificateHeaderAnnotation). The route
// kind that made the Gateway checked the values and reported them on its own objects.
func implicitClientValidation(a map[string]string, cv *irv1.ClientValidation) {
	if d, err := strconv.ParseUint(a[translation.ImplicitVerifyDepthAnnotation], 10, 32); err == nil {
		cv.VerifyDepth = uint32(d)
	}
	cv.CertificateHeader = a[translation.ImplicitCertificateHeaderAnnotation]
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

// resolveCACertificate reads the CA certificates one caCertificateRef of Gateway g names
// (readCA); a ConfigMap in another namespace only with a ReferenceGrant.
func (t *session) resolveCACertificate(g *gatewayState, ref gwapiv1.ObjectReference) ([]byte, gwapiv1.ListenerConditionReason, error) {
	r := caSource{group: string(ref.Group), kind: string(ref.Kind), name: string(ref.Name), ns: g.key.Namespace,
		secrets: g.key.Namespace == translation.ImplicitNamespace} // see translation.ImplicitNamespace
	if ref.Namespace != nil && *ref.Namespace != "" {
		r.ns, r.nsSet = string(*ref.Namespace), true
	}
	if r.group == "" && (r.kind == "ConfigMap" || r.kind == "Secret" && r.secrets) && r.ns != g.key.Namespace &&
		!t.granted(gwapiv1.GroupName, "Gateway", g.key.Namespace, "", r.kind, r.ns, r.name) {
		return nil, gwapiv1.ListenerReasonRefNotPermitted, fmt.Errorf("%s %s/%s is not permitted by any ReferenceGrant", r.kind, r.ns, r.name)
	}
	b, fault, err := t.readCA(r)
	return b, caListenerReasons[fault], err
}
