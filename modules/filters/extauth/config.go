package extauth

import (
	"time"
)

// ModuleID is the filter this package registers: the ExtensionRef filter for
// gateway.coxswain-labs.dev CoxswainExternalAuth objects.
const ModuleID = "filter.ext.gateway.coxswain-labs.dev.CoxswainExternalAuth"

// Protocol is how the auth service is called.
// +kubebuilder:validation:Enum=HTTP;GRPC
type Protocol string

// Protocols.
const (
	// ProtocolHTTP is forward-auth: the request's method, Host, path, query and headers (no
	// body) are replayed to the service over HTTP/1.1; a 2xx answer allows the request.
	ProtocolHTTP Protocol = "HTTP"
	// ProtocolGRPC is Envoy's external authorization API, envoy.service.auth.v3.Authorization/Check,
	// over cleartext HTTP/2.
	ProtocolGRPC Protocol = "GRPC"
)

// DefaultTimeout bounds one check when Timeout is unset.
const DefaultTimeout = 200 * time.Millisecond

// MaxDeniedBody is the most of a denial's body that is relayed to the client; the rest is cut.
const MaxDeniedBody = 64 << 10

// BackendRef is the Service port of the auth service.
type BackendRef struct {
	// Name of the Service.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
	// Namespace of the Service; the object's own when unset. Another namespace needs a
	// ReferenceGrant there from CoxswainExternalAuth (group gateway.coxswain-labs.dev) to Services.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Port of the Service.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +required
	Port int32 `json:"port"`
}

// TargetRef is a Gateway the policy form applies to. The proxy ignores it: the controller puts
// the filter at the front of every rule of the Gateway's routes.
type TargetRef struct {
	// Group is gateway.networking.k8s.io.
	// +kubebuilder:validation:MaxLength=253
	// +required
	Group string `json:"group"`
	// Kind is Gateway.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +required
	Kind string `json:"kind"`
	// Name of the Gateway, in the object's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
}

// Spec is the spec of a CoxswainExternalAuth object: what a user writes. The CRD's spec type in
// modules/api/v1alpha1 is this type, so the kubebuilder markers below are the CRD's validation.
type Spec struct {
	// Protocol is HTTP (forward-auth) or GRPC (Envoy's ext_authz API).
	// +required
	Protocol Protocol `json:"protocol"`
	// BackendRef is the auth service.
	// +required
	BackendRef BackendRef `json:"backendRef"`
	// Timeout bounds one check, connecting included (200ms when unset). Past it the check has
	// failed: see FailClosed.
	// +kubebuilder:validation:Pattern=`^([0-9]{1,5}(h|m|s|ms)){1,4}$`
	// +optional
	Timeout string `json:"timeout,omitempty"`
	// FailClosed answers 503 when the auth service cannot be asked (unreachable, an error, a
	// timeout, a 5xx); false lets the request through instead. The default is true. A backend
	// that does not resolve or has no ready endpoint is always 503.
	// +optional
	FailClosed *bool `json:"failClosed,omitempty"`
	// AllowedResponseHeaders are the headers of an allowing answer that reach the upstream
	// request. HTTP: exactly these are copied from the auth response, replacing what the client
	// sent; unset copies none. GRPC: the OkResponse's header mutations (set, append, remove) are
	// applied only to these; unset applies them all, as Envoy does.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z0-9!#$%&'*+.^_|~-]+$`
	// +optional
	AllowedResponseHeaders []string `json:"allowedResponseHeaders,omitempty"`
	// TargetRefs are the Gateways whose every HTTPRoute and GRPCRoute rule this applies to,
	// first in the rule's filters. An object used only as an ExtensionRef leaves it unset.
	// +kubebuilder:validation:MaxItems=16
	// +optional
	TargetRefs []TargetRef `json:"targetRefs,omitempty"`
}

// Config is the module's config: the object's spec plus what the controller's resolver
// (translate.filter.ext.gateway.coxswain-labs.dev.CoxswainExternalAuth, or the policy
// translator) adds. None of the added fields is in the CRD; a spec that sets one is rejected.
type Config struct {
	Spec `json:",inline"`
	// Name is "<namespace>/<name>" of the object, for metrics and logs (controller-added).
	Name string `json:"name,omitempty"`
	// Cluster is the snapshot cluster backendRef resolved to (controller-added).
	Cluster string `json:"cluster,omitempty"`
	// Unresolved says why backendRef did not resolve (controller-added); the module then
	// answers every request 503.
	Unresolved string `json:"unresolved,omitempty"`
}

// DeepCopyInto copies the spec into out, for the API type's generated deepcopy.
func (in *Spec) DeepCopyInto(out *Spec) {
	*out = *in
	if in.FailClosed != nil {
		b := *in.FailClosed
		out.FailClosed = &b
	}
	out.AllowedResponseHeaders = append([]string(nil), in.AllowedResponseHeaders...)
	out.TargetRefs = append([]TargetRef(nil), in.TargetRefs...)
}
