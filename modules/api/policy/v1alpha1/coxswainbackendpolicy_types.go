package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// CoxswainBackendPolicy configures how proxies talk to the pods of the Services it targets
// (Gateway API policy attachment, direct: GEP-713): connect and idle timeouts, the load-balancing
// algorithm, a circuit breaker and session persistence. It applies to every route that sends
// traffic to a targeted Service; HTTPRoute and GRPCRoute get every field, TCPRoute, TLSRoute and
// UDPRoute the connect timeout and the algorithm only. When two policies target one Service the
// older one (creationTimestamp, then name) applies and the other is Conflicted for it.
//
// The fields below targetRefs are deliberately not validated by the schema (plain strings and
// integers, no enums or patterns): a value the controller cannot use is ignored with a warning
// and the default applies, and the policy's Accepted condition names each ignored field and why.
// A typo must never turn into a rejected object or a dropped Service.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=coxswain,shortName=cbp
// +kubebuilder:metadata:labels="gateway.networking.k8s.io/policy=Direct"
// +kubebuilder:printcolumn:name="Algorithm",type=string,JSONPath=`.spec.loadBalancer.algorithm`
// +kubebuilder:printcolumn:name="Connect",type=string,JSONPath=`.spec.timeouts.connect`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type CoxswainBackendPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec says which Services the policy targets and how their pods are reached.
	// +required
	Spec CoxswainBackendPolicySpec `json:"spec"`

	// Status has one ancestor entry per targeted Service and controller, each with an Accepted
	// condition.
	// +optional
	Status gwapiv1.PolicyStatus `json:"status,omitempty"`
}

// CoxswainBackendPolicySpec is what a CoxswainBackendPolicy says.
type CoxswainBackendPolicySpec struct {
	// TargetRefs are the Services (group "", kind Service) in the policy's namespace it applies
	// to. A reference to another kind is not accepted (reason Invalid), one to a Service that does
	// not exist neither (reason TargetNotFound).
	//
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	TargetRefs []gwapiv1.LocalPolicyTargetReference `json:"targetRefs"`

	// Timeouts bound connecting to a pod and keeping an idle connection to it.
	// +optional
	Timeouts *BackendTimeouts `json:"timeouts,omitempty"`

	// LoadBalancer chooses the algorithm that picks a pod for each request or connection.
	// +optional
	LoadBalancer *BackendLoadBalancer `json:"loadBalancer,omitempty"`

	// CircuitBreaker stops sending requests to a pod whose error rate is too high, for a while
	// (HTTPRoute and GRPCRoute only).
	// +optional
	CircuitBreaker *BackendCircuitBreaker `json:"circuitBreaker,omitempty"`

	// SessionPersistence sends a client's requests to the same pod (HTTPRoute and GRPCRoute only).
	// +optional
	SessionPersistence *BackendSessionPersistence `json:"sessionPersistence,omitempty"`
}

// BackendTimeouts are durations in Go syntax ("500ms", "10s", "1m30s").
type BackendTimeouts struct {
	// Connect bounds establishing a connection to a pod (a slower connect answers 502); the
	// proxy's --proxy-connect-timeout when unset.
	// +optional
	Connect string `json:"connect,omitempty"`

	// Idle closes a pooled connection to a pod after it has been idle this long (HTTPRoute and
	// GRPCRoute only); the proxy's default when unset.
	// +optional
	Idle string `json:"idle,omitempty"`
}

// BackendLoadBalancer chooses the load-balancing algorithm.
type BackendLoadBalancer struct {
	// Algorithm is one of round_robin (the default), least_conn, ewma, ip_hash (the same as
	// hash:source-ip), hash:source-ip, hash:uri, hash:header=<header name> or
	// hash:cookie=<cookie name>. An unknown value falls back to round_robin with a warning.
	// +optional
	Algorithm string `json:"algorithm,omitempty"`
}

// BackendCircuitBreaker opens, per route and pod, when the pod's error rate (5xx answers,
// connect failures, timeouts) reaches Threshold percent over Window with at least MinRequests
// requests in it. Open, it answers 503 without connecting for OpenDuration, then lets one probe
// through: success closes it, failure opens it again, for twice as long each time up to
// MaxOpenDuration when that is set.
type BackendCircuitBreaker struct {
	// Threshold is the error rate in percent, 1 to 100, that opens the breaker. It is the on/off
	// switch: unset or out of range, there is no circuit breaker, and the policy's Accepted
	// message says so.
	// +optional
	Threshold *int32 `json:"threshold,omitempty"`

	// Window is the duration the error rate is measured over; 10s when unset.
	// +optional
	Window string `json:"window,omitempty"`

	// OpenDuration is how long the breaker stays open before a probe; 5s when unset.
	// +optional
	OpenDuration string `json:"openDuration,omitempty"`

	// MinRequests is how many requests the window must hold before the breaker may open; 10
	// when unset.
	// +optional
	MinRequests *int32 `json:"minRequests,omitempty"`

	// MaxOpenDuration caps the open duration, which doubles on every failed probe; unset, the
	// open duration stays constant.
	// +optional
	MaxOpenDuration string `json:"maxOpenDuration,omitempty"`
}

// BackendSessionPersistence pins a client to one pod.
type BackendSessionPersistence struct {
	// Type is Cookie (the default: the proxy sets a cookie naming the pod, opaquely) or Header
	// (the value of a request header is hashed onto the pods).
	// +optional
	Type string `json:"type,omitempty"`

	// SessionName is the cookie name (Cookie; __coxswain_session when unset) or the header name
	// (Header; required).
	// +optional
	SessionName string `json:"sessionName,omitempty"`
}

// CoxswainBackendPolicyList is a list of CoxswainBackendPolicy.
//
// +kubebuilder:object:root=true
type CoxswainBackendPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CoxswainBackendPolicy `json:"items"`
}
