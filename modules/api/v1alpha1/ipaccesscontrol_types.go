package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/coxswain-labs/coxswain/modules/filters/ipaccess"
)

// IpAccessControlSpec is the config of the filter.ext.gateway.coxswain-labs.dev.IpAccessControl
// module itself; its validation markers live on ipaccess.Config.
type IpAccessControlSpec = ipaccess.Config

// IpAccessControl refuses requests by client address: a deny list, then an optional allow list,
// of CIDRs or bare addresses, IPv4 and IPv6. An HTTPRoute or GRPCRoute rule uses it with an
// ExtensionRef filter {group: gateway.coxswain-labs.dev, kind: IpAccessControl, name: ...} naming
// an object in the route's namespace. The entries are not validated here: one that does not
// parse is skipped, and the routes using the object say so in their ResolvedRefs message. It has
// no status: the routes that reference it report on it.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=coxswain,shortName=ipac
// +kubebuilder:printcolumn:name="Deny",type=string,JSONPath=`.spec.deny`
// +kubebuilder:printcolumn:name="Allow",type=string,JSONPath=`.spec.allow`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type IpAccessControl struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is spelled ipaccess.Config, not the alias (see PathRewriteRegex).
	// +required
	Spec ipaccess.Config `json:"spec"`
}

// IpAccessControlList is a list of IpAccessControl.
//
// +kubebuilder:object:root=true
type IpAccessControlList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []IpAccessControl `json:"items"`
}
