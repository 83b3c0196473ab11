package ipaccess

import "slices"

// ModuleID is the filter this package registers: the ExtensionRef filter for
// gateway.coxswain-labs.dev IpAccessControl objects.
const ModuleID = "filter.ext.gateway.coxswain-labs.dev.IpAccessControl"

// Config is the spec of an IpAccessControl object and, byte for byte, the module's config: the
// controller copies the object's .spec into the ModuleConfig verbatim. The CRD's spec type in
// modules/api/v1alpha1 is this type, so the kubebuilder markers below are the CRD's validation.
//
// The entries are deliberately not validated by the CRD: an entry the filter cannot parse is
// skipped, logged and reported on the routes that use the object (their ResolvedRefs message),
// rather than making the API server refuse the whole object, so one typo in a list of thousands
// does not block an update of the others.
type Config struct {
	// Deny lists the clients refused with 403 (PERMISSION_DENIED for gRPC), whatever Allow says:
	// CIDRs ("10.0.0.0/8", "2001:db8::/32") or bare addresses ("192.0.2.7", a /32; "2001:db8::1",
	// a /128). IPv4-mapped IPv6 entries ("::ffff:192.0.2.0/120") mean their IPv4 range.
	// +kubebuilder:validation:MaxItems=16384
	// +listType=atomic
	// +optional
	Deny []string `json:"deny,omitempty"`
	// Allow, when it lists anything, is the only clients let through: any other is refused with
	// 403. Empty or absent means no allow-list. Same entry syntax as Deny. An allow-list whose
	// every entry is invalid admits nobody: skipping an entry never widens access.
	// +kubebuilder:validation:MaxItems=16384
	// +listType=atomic
	// +optional
	Allow []string `json:"allow,omitempty"`
}

// DeepCopyInto copies c into out, lists included. The API type's generated deepcopy
// (modules/api/v1alpha1) calls it: controller-gen does not generate code for this package.
func (c *Config) DeepCopyInto(out *Config) {
	*out = *c
	out.Deny = slices.Clone(c.Deny)
	out.Allow = slices.Clone(c.Allow)
}
