package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/coxswain-labs/coxswain/modules/filters/ratelimit"
)

// RateLimitSpec is what a RateLimit object says; the module config the proxy loads is this plus
// the zone the controller adds (ratelimit.Config). Its validation markers live on ratelimit.Spec.
type RateLimitSpec = ratelimit.Spec

// RateLimit limits the request rate of a route rule, per client address or per header value, in
// each proxy (mode Local) or across the fleet through Redis (mode Global). An HTTPRoute or
// GRPCRoute rule uses it with an ExtensionRef filter {group: gateway.coxswain-labs.dev, kind:
// RateLimit, name: ...} naming an object in the route's namespace; every rule naming one object
// shares its limit. It has no status: the routes that reference it report on it.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=coxswain,shortName=rl
// +kubebuilder:printcolumn:name="Requests",type=integer,JSONPath=`.spec.requests`
// +kubebuilder:printcolumn:name="Unit",type=string,JSONPath=`.spec.unit`
// +kubebuilder:printcolumn:name="Burst",type=integer,JSONPath=`.spec.burst`
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type RateLimit struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// (Spec is spelled ratelimit.Spec, not the alias: see PathRewriteRegex.Spec.)

	// Spec is the limit: how many requests per unit each key may make, and where it is counted.
	// +required
	Spec ratelimit.Spec `json:"spec"`
}

// RateLimitList is a list of RateLimit.
//
// +kubebuilder:object:root=true
type RateLimitList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RateLimit `json:"items"`
}
