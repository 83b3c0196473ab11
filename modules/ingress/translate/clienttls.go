package translate

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"sort"
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

// caRef is an auth-tls-secret: the Secret holding the CA bundle.
type caRef struct{ namespace, name string }

func (c caRef) String() string { return c.namespace + "/" + c.name }

// clientTLS is what auth-tls-secret makes of one Ingress.
type clientTLS struct {
	asked   bool   // the annotation is set
	gateway string // the implicit Gateway of its CA; "" when the CA is unusable
	closed  string // why its paths answer 503 everywhere ("" when the CA is usable)
}

// readClientTLS reads the auth-tls-secret of each Ingress (oldest first): a CA that parses makes
// a Gateway of its own; a missing or bad one closes the Ingress.
func readClientTLS(ings []*networkingv1.Ingress, w translation.ImplicitWorld) (map[types.NamespacedName]clientTLS, map[caRef]string) {
	out := map[types.NamespacedName]clientTLS{}
	var refs []caRef
	seen := map[caRef]bool{}
	for _, ing := range ings {
		v, ok := ing.Annotations[Prefix+"auth-tls-secret"]
		if !ok {
			continue
		}
		key := types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}
		ref := caRef{ing.Namespace, strings.TrimSpace(v)}
		if ns, name, found := strings.Cut(ref.name, "/"); found { // ingress-nginx writes namespace/name
			if ns != ing.Namespace {
				out[key] = clientTLS{asked: true, closed: fmt.Sprintf("auth-tls-secret %q is in another namespace; name a Secret in %s", v, ing.Namespace)}
				continue
			}
			ref.name = name
		}
		if why := caProblem(w, ref); why != "" {
			out[key] = clientTLS{asked: true, closed: why}
			continue
		}
		out[key] = clientTLS{asked: true}
		if !seen[ref] {
			seen[ref] = true
			refs = append(refs, ref)
		}
	}
	sort.Slice(refs, func(i, j int) bool { return refs[i].String() < refs[j].String() })
	gateways := map[caRef]string{}
	for i, ref := range refs {
		gateways[ref] = fmt.Sprintf("%s-ca-%d", httpsGateway, i)
	}
	for _, ing := range ings {
		key := types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}
		if c := out[key]; c.asked && c.closed == "" {
			ref := caRef{ing.Namespace, strings.TrimSpace(ing.Annotations[Prefix+"auth-tls-secret"])}
			if _, name, found := strings.Cut(ref.name, "/"); found {
				ref.name = name
			}
			c.gateway = gateways[ref]
			out[key] = c
		}
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
