package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// ClientTrafficPolicy configures how proxies treat the connections and requests of clients on the
// listeners of the Gateways it targets (Gateway API policy attachment, direct: GEP-713): a PROXY
// protocol header in front of every connection, how many trusted proxies in front of the
// Gateway appended to X-Forwarded-For, and HTTP/3. Its fields are Envoy Gateway's
// ClientTrafficPolicy's.
//
// A policy naming a listener (sectionName) overrides one naming its whole Gateway for that
// listener; of two policies naming the same Gateway (or the same listener) the older one
// (creationTimestamp, then name) applies and the other is Conflicted. A listener shares its
// socket with the Gateway listeners on the same address, port and protocol: a setting applies to
// a socket only when every listener on it asks for the same, otherwise none of it does and the
// policy is Conflicted there, naming the listener it would change (docs/controller.md).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=coxswain,shortName=ctp
// +kubebuilder:metadata:labels="gateway.networking.k8s.io/policy=Direct"
// +kubebuilder:printcolumn:name="ProxyProtocol",type=boolean,JSONPath=`.spec.proxyProtocol.enabled`
// +kubebuilder:printcolumn:name="TrustedHops",type=integer,JSONPath=`.spec.clientIPDetection.xForwardedFor.numTrustedHops`
// +kubebuilder:printcolumn:name="HTTP3",type=boolean,JSONPath=`.spec.http3.enabled`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClientTrafficPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec says which Gateways (or listeners) the policy targets and how their clients are seen.
	// +required
	Spec ClientTrafficPolicySpec `json:"spec"`

	// Status has one ancestor entry per targeted Gateway (with its sectionName when the
	// targetRef names one) and controller, each with an Accepted condition.
	// +optional
	Status gwapiv1.PolicyStatus `json:"status,omitempty"`
}

// ClientTrafficPolicySpec is what a ClientTrafficPolicy says.
type ClientTrafficPolicySpec struct {
	// TargetRefs are the Gateways (group gateway.networking.k8s.io, kind Gateway) in the policy's
	// namespace it applies to; sectionName narrows one to a listener. A reference to another kind
	// is not accepted (reason Invalid), one to a Gateway or listener that does not exist neither
	// (reason TargetNotFound).
	//
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	TargetRefs []gwapiv1.LocalPolicyTargetReferenceWithSectionName `json:"targetRefs"`

	// ProxyProtocol makes every connection begin with a PROXY protocol header (from a load
	// balancer in front of the Gateway), whose source address is then the client's. Not for UDP
	// listeners (ignored there, said in the Accepted message).
	// +optional
	ProxyProtocol *ProxyProtocol `json:"proxyProtocol,omitempty"`

	// ClientIPDetection says how a request's client IP is found beyond the connection's peer.
	// HTTP and HTTPS listeners only.
	// +optional
	ClientIPDetection *ClientIPDetection `json:"clientIPDetection,omitempty"`

	// ClientCertificate says what reaches the backends of a verified client certificate, on
	// HTTPS listeners whose Gateway validates client certificates (spec.tls.frontend). HTTPS
	// listeners only.
	// +optional
	ClientCertificate *ClientCertificate `json:"clientCertificate,omitempty"`

	// HTTP3 serves HTTP/3 (QUIC) on the targeted HTTPS listeners, on a UDP socket of the same
	// address and port, with the same certificates and routes, and advertises it in the Alt-Svc
	// header of their HTTP/1.1 and HTTP/2 responses. HTTPS listeners only. A UDP listener on the
	// same port keeps it: HTTP/3 is then not served there (the listener's HTTP3 condition says
	// why).
	// +optional
	HTTP3 *HTTP3Settings `json:"http3,omitempty"`
}

// HTTP3Settings turns HTTP/3 on.
type HTTP3Settings struct {
	// Enabled serves HTTP/3.
	// +required
	Enabled bool `json:"enabled"`

	// Allow0RTT accepts requests in 0-RTT early data on resumed connections, which saves a
	// round trip but lets an attacker who captured the packets replay them. The proxy serves only
	// GET, HEAD and OPTIONS from early data, marked "Early-Data: 1" for the backend (RFC 8470);
	// any other request waits for the handshake to complete. Default false: no early data.
	// +optional
	Allow0RTT bool `json:"allow0RTT,omitempty"`
}

// ClientCertificate passes what a verified client certificate proves to the backends.
type ClientCertificate struct {
	// SubjectHeader names a request header that carries the subject of the client certificate the
	// listener verified, as an RFC 2253 string ("CN=alice,O=acme"). A copy of the header sent by
	// the client is always removed, so the backends can trust it: it is absent when no
	// certificate was verified (no certificate, or one the AllowInsecureFallback mode let
	// through unverified).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9!#$%&'*+.^_|~-]+$`
	SubjectHeader string `json:"subjectHeader"`
}

// ProxyProtocolVersion is a PROXY protocol version: V1 (text) or V2 (binary).
// +kubebuilder:validation:Enum=V1;V2
type ProxyProtocolVersion string

// The PROXY protocol versions.
const (
	ProxyProtocolV1 ProxyProtocolVersion = "V1"
	ProxyProtocolV2 ProxyProtocolVersion = "V2"
)

// ProxyProtocol requires a PROXY protocol header on every connection.
type ProxyProtocol struct {
	// Enabled requires the header; a connection without a valid one is closed.
	// +required
	Enabled bool `json:"enabled"`

	// Versions are the versions accepted; empty accepts both.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=2
	Versions []ProxyProtocolVersion `json:"versions,omitempty"`
}

// ClientIPDetection configures how the client IP of a request is resolved.
type ClientIPDetection struct {
	// XForwardedFor takes the client from the X-Forwarded-For header.
	// +optional
	XForwardedFor *XForwardedForSettings `json:"xForwardedFor,omitempty"`
}

// XForwardedForSettings reads the client IP from X-Forwarded-For.
type XForwardedForSettings struct {
	// NumTrustedHops is the number of trusted proxies in front of the Gateway, each appending to
	// X-Forwarded-For: the client is the address that many entries from its right end. 0 (or a
	// header with fewer entries) means the connection's peer.
	// +optional
	NumTrustedHops *uint32 `json:"numTrustedHops,omitempty"`
}

// ClientTrafficPolicyList is a list of ClientTrafficPolicy.
//
// +kubebuilder:object:root=true
type ClientTrafficPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClientTrafficPolicy `json:"items"`
}
