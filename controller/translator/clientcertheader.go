package translator

import (
	"fmt"
	"strings"

	"golang.org/x/net/http/httpguts"
	"google.golang.org/protobuf/proto"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	policyv1a1 "github.com/coxswain-labs/coxswain/modules/api/policy/v1alpha1"
)

// subjectHeaderInvalid says why a ClientTrafficPolicy's spec.clientCertificate would have been
// rejected by the API server (a file in standalone mode has not been through it); "" when fine.
func subjectHeaderInvalid(cc *policyv1a1.ClientCertificate) string {
	if cc == nil {
		return ""
	}
	h := cc.SubjectHeader
	switch {
	case h == "" || len(h) > 128 || !httpguts.ValidHeaderFieldName(h):
		return fmt.Sprintf("spec.clientCertificate.subjectHeader: %q is not an HTTP header name", h)
	case isHopOrReserved(h):
		return fmt.Sprintf("spec.clientCertificate.subjectHeader: %q is a header the proxy manages itself", h)
	}
	return ""
}

// isHopOrReserved rejects names whose meaning to HTTP (or to the proxy) a copied subject would
// change.
func isHopOrReserved(h string) bool {
	switch strings.ToLower(h) {
	case "host", "connection", "content-length", "transfer-encoding", "te", "upgrade", "keep-alive",
		"proxy-connection", "trailer", "x-forwarded-for", "x-forwarded-proto", "x-forwarded-host", "forwarded":
		return true
	}
	return false
}

// subjectHeader is the header the ClientTrafficPolicy of l names for the verified client
// certificate's subject, "" for none.
func (l *listenerState) subjectHeader() string {
	if l.clientPolicy == nil || l.clientPolicy.p.obj.Spec.ClientCertificate == nil {
		return ""
	}
	return l.clientPolicy.p.obj.Spec.ClientCertificate.SubjectHeader
}

// noteSubjectHeader notes on the policy that a listener which is not HTTPS ignores the subject
// header.
func (l *listenerState) noteSubjectHeader() {
	if l.subjectHeader() != "" && l.spec.Protocol != gwapiv1.HTTPSProtocolType {
		l.clientPolicy.ignored = appendOnce(l.clientPolicy.ignored,
			fmt.Sprintf("spec.clientCertificate on %s listener %s (client certificates are for HTTPS)", l.spec.Protocol, l.spec.Name))
	}
}

// serverClientValidation is the IR client validation of the server of HTTPS listener l: its
// Gateway's (frontendValidation) with the subject header of its ClientTrafficPolicy. A header on
// a listener that validates nothing is still stripped, so that no client can forge it.
func (t *session) serverClientValidation(l *listenerState) *irv1.ClientValidation {
	h := l.subjectHeader()
	if l.spec.Protocol != gwapiv1.HTTPSProtocolType {
		h = ""
	}
	switch {
	case l.clientValidation == nil && h == "":
		return nil
	case l.clientValidation == nil:
		return &irv1.ClientValidation{SubjectHeader: h}
	}
	cv := proto.CloneOf(l.clientValidation)
	cv.SubjectHeader = h
	return cv
}
