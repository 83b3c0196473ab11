package translate

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"sort"
	"strconv"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/modules/translation"
)

// Client certificates (auth-tls-secret) are checked in the TLS handshake, so per host, not per
// path: each TLS host of an Ingress that asks goes on an implicit HTTPS Gateway of its own CA
// ("ingress-https-ca-<i>", on the same socket as ingress-https), whose spec.tls.frontend
// validation names the Secret. The core's frontend validation then does the rest, as for an
// operator's Gateway. The Ingress's paths fail closed (503) wherever the check does not run for
// them: on the HTTP listener (unless ssl-redirect sends them to HTTPS), on an HTTPS host whose
// listener another Ingress's TLS entry gives, and when the Secret has no usable CA.

// caSecretKey is the key of the CA bundle in the auth-tls-secret Secret, as ingress-nginx reads it.
const caSecretKey = "ca.crt"

// certificateHeader is the request header auth-tls-pass-certificate-to-upstream fills, as
// ingress-nginx names it.
const certificateHeader = "ssl-client-cert"

// caRef is an auth-tls-secret: the Secret holding the CA bundle.
type caRef struct{ namespace, name string }

func (c caRef) String() string { return c.namespace + "/" + c.name }

// caGateway is what makes an implicit Gateway of client validation: Ingresses that share the
// CA, the depth and the certificate header share one.
type caGateway struct {
	ref      caRef
	depth    uint32 // auth-tls-verify-depth; 0 when not set (no limit)
	passCert bool   // auth-tls-pass-certificate-to-upstream
}

func (g caGateway) less(o caGateway) bool {
	if g.ref != o.ref {
		return g.ref.String() < o.ref.String()
	}
	if g.depth != o.depth {
		return g.depth < o.depth
	}
	return !g.passCert && o.passCert
}

// clientTLS is what auth-tls-secret makes of one Ingress.
type clientTLS struct {
	asked   bool   // the annotation is set
	gateway string // the implicit Gateway of its CA; "" when the CA is unusable
	closed  string // why its paths answer 503 everywhere ("" when the CA is usable)
	// field is the annotation closed is about (auth-tls-secret unless a companion is invalid).
	field string
}

// parseClientTLSOptions reads auth-tls-verify-depth and auth-tls-pass-certificate-to-upstream;
// an invalid value names its annotation and why (the Ingress then fails closed, as for a bad CA).
func parseClientTLSOptions(a map[string]string) (g caGateway, field, why string) {
	if v, ok := a[Prefix+"auth-tls-verify-depth"]; ok {
		d, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
		if err != nil || d < 1 {
			return g, "auth-tls-verify-depth", fmt.Sprintf("auth-tls-verify-depth %q is not an integer of at least 1", v)
		}
		g.depth = uint32(d)
	}
	if v, ok := a[Prefix+"auth-tls-pass-certificate-to-upstream"]; ok {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return g, "auth-tls-pass-certificate-to-upstream", fmt.Sprintf("auth-tls-pass-certificate-to-upstream %q is not true or false", v)
		}
		g.passCert = b
	}
	return g, "", ""
}

// readClientTLS reads the auth-tls-secret of each Ingress (oldest first): a CA that parses makes
// a Gateway of its own; a missing or bad one closes the Ingress.
func readClientTLS(ings []*networkingv1.Ingress, w translation.ImplicitWorld) (map[types.NamespacedName]clientTLS, map[caGateway]string) {
	out := map[types.NamespacedName]clientTLS{}
	of := map[types.NamespacedName]caGateway{}
	var cgs []caGateway
	seen := map[caGateway]bool{}
	for _, ing := range ings {
		v, ok := ing.Annotations[Prefix+"auth-tls-secret"]
		if !ok {
			continue
		}
		key := types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}
		ref := caRef{ing.Namespace, strings.TrimSpace(v)}
		if ns, name, found := strings.Cut(ref.name, "/"); found { // ingress-nginx writes namespace/name
			if ns != ing.Namespace {
				out[key] = clientTLS{asked: true, field: "auth-tls-secret", closed: fmt.Sprintf("auth-tls-secret %q is in another namespace; name a Secret in %s", v, ing.Namespace)}
				continue
			}
			ref.name = name
		}
		if why := caProblem(w, ref); why != "" {
			out[key] = clientTLS{asked: true, field: "auth-tls-secret", closed: why}
			continue
		}
		cg, field, why := parseClientTLSOptions(ing.Annotations)
		if why != "" {
			out[key] = clientTLS{asked: true, field: field, closed: why}
			continue
		}
		cg.ref = ref
		out[key], of[key] = clientTLS{asked: true, field: "auth-tls-secret"}, cg
		if !seen[cg] {
			seen[cg] = true
			cgs = append(cgs, cg)
		}
	}
	sort.Slice(cgs, func(i, j int) bool { return cgs[i].less(cgs[j]) })
	gateways := map[caGateway]string{}
	for i, cg := range cgs {
		gateways[cg] = fmt.Sprintf("%s-ca-%d", httpsGateway, i)
	}
	for key, cg := range of {
		c := out[key]
		c.gateway = gateways[cg]
		out[key] = c
	}
	return out, gateways
}

// caProblem says why Secret ref gives no CA certificate, "" when it does.
func caProblem(w translation.ImplicitWorld, ref caRef) string {
	if ref.name == "" {
		return "auth-tls-secret names no Secret"
	}
	if w.Secret == nil || !w.Secret(ref.namespace, ref.name) {
		return fmt.Sprintf("Secret %s of auth-tls-secret does not exist (it must be of type kubernetes.io/tls, the Secrets Coxswain reads)", ref)
	}
	data := w.SecretData(ref.namespace, ref.name, caSecretKey)
	if len(data) == 0 {
		return fmt.Sprintf("Secret %s of auth-tls-secret has no key %s", ref, caSecretKey)
	}
	for block, rest := pem.Decode(data); block != nil; block, rest = pem.Decode(rest) {
		if block.Type == "CERTIFICATE" {
			if _, err := x509.ParseCertificate(block.Bytes); err == nil {
				return ""
			}
		}
	}
	return fmt.Sprintf("Secret %s of auth-tls-secret: %s holds no PEM certificate that parses", ref, caSecretKey)
}

// clientTLSAnnotations are the implicit Gateway's annotations for what the Gateway API's
// frontend validation cannot say (translation.ImplicitVerifyDepthAnnotation and its sibling).
func clientTLSAnnotations(cg caGateway) map[string]string {
	a := map[string]string{}
	if cg.depth > 0 {
		a[translation.ImplicitVerifyDepthAnnotation] = strconv.FormatUint(uint64(cg.depth), 10)
	}
	if cg.passCert {
		a[translation.ImplicitCertificateHeaderAnnotation] = certificateHeader
	}
	if len(a) == 0 {
		return nil
	}
	return a
}

// frontendValidation is the spec.tls.frontend of the implicit Gateway of CA ref.
func frontendValidation(ref caRef) *gwapiv1.GatewayTLSConfig {
	ns := gwapiv1.Namespace(ref.namespace)
	return &gwapiv1.GatewayTLSConfig{Frontend: &gwapiv1.FrontendTLSConfig{Default: gwapiv1.TLSConfig{
		Validation: &gwapiv1.FrontendTLSValidation{
			CACertificateRefs: []gwapiv1.ObjectReference{{Group: "", Kind: "Secret", Name: gwapiv1.ObjectName(ref.name), Namespace: &ns}},
			Mode:              gwapiv1.AllowValidOnly,
		},
	}}}
}

// clientTLSClosed says why a path of an Ingress with auth-tls-secret must not be served on
// listener l ("" when it may): the handshake there did not check the client's certificate
// against the Ingress's CA.
func clientTLSClosed(c clientTLS, l translation.ListenerInfo, sslRedirect bool) string {
	switch {
	case !c.asked:
		return ""
	case c.closed != "":
		return c.closed
	case l.Protocol == gwapiv1.HTTPProtocolType && !sslRedirect:
		return "auth-tls-secret: client certificates are checked on HTTPS only"
	case l.Protocol == gwapiv1.HTTPSProtocolType && l.Gateway != translation.ImplicitNamespace+"/"+c.gateway:
		host := l.Hostname
		if host == "" {
			host = "*"
		}
		return fmt.Sprintf("auth-tls-secret: HTTPS host %q is not checked with this Ingress's CA (no tls entry of this Ingress gives its certificate, or an older Ingress's does)", host)
	}
	return ""
}
