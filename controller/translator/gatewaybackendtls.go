package translator

import (
	"fmt"
	"strings"

	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// gatewayBackendTLS resolves the Gateway's spec.tls.backend.clientCertificateRef: the key pair
// its proxies present to every TLS backend (those a BackendTLSPolicy makes TLS). A reference that
// does not resolve sets the Gateway's ResolvedRefs False and presents nothing; it does not change
// Accepted or Programmed (the spec keeps the two apart).
func (t *session) gatewayBackendTLS(g *gatewayState) {
	tc := g.gw.Spec.TLS
	if tc == nil || tc.Backend == nil || tc.Backend.ClientCertificateRef == nil {
		return
	}
	// The Gateway itself refers (no ListenerSet owner): grants are judged from the Gateway.
	name, reason, err := t.resolveCertificate(&listenerState{gw: g}, *tc.Backend.ClientCertificateRef)
	if err != nil {
		r := gwapiv1.GatewayReasonInvalidClientCertificateRef
		if reason == gwapiv1.ListenerReasonRefNotPermitted {
			r = gwapiv1.GatewayReasonRefNotPermitted
		}
		g.backendTLS = condState{reason: string(r), msg: "spec.tls.backend.clientCertificateRef: " + err.Error()}
		t.gatewayProblem(g, "spec.tls.backend.clientCertificateRef", string(r), err.Error())
		return
	}
	g.clientCert = name
}

// withClientCert is ut with g's client certificate, and the cluster name suffix that keeps the
// cluster apart from the same Service port's cluster of a Gateway that presents another one (or
// none). ut is shared by the policy's clusters, so it is copied, never changed.
func withClientCert(ut *irv1.UpstreamTLS, l *listenerState) (*irv1.UpstreamTLS, string) {
	if ut == nil || l == nil || l.gw.clientCert == "" {
		return ut, ""
	}
	c := &irv1.UpstreamTLS{ServerName: ut.GetServerName(), CaPem: ut.GetCaPem(), SystemRoots: ut.GetSystemRoots(),
		SubjectAltNames: ut.GetSubjectAltNames(), ClientCertificate: l.gw.clientCert}
	return c, fmt.Sprintf("client=%s", l.gw.key)
}

// trimTLSSuffixes takes off a cluster name what resolveBackend adds for upstream TLS (see
// there): "/client=<namespace>/<gateway>", then "/tls".
func trimTLSSuffixes(name string) string {
	if i := strings.Index(name, "/client="); i >= 0 {
		name = name[:i]
	}
	return strings.TrimSuffix(name, "/tls")
}
