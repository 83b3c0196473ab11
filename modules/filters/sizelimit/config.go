package sizelimit

// ModuleID is the filter this package registers: the ExtensionRef filter for
// gateway.coxswain-labs.dev RequestSizeLimit objects.
const ModuleID = "filter.ext.gateway.coxswain-labs.dev.RequestSizeLimit"

// Config is the spec of a RequestSizeLimit object and, byte for byte, the module's config: the
// controller copies the object's .spec into the ModuleConfig verbatim. The CRD's spec type in
// modules/api/v1alpha1 is this type, so the kubebuilder markers below are the CRD's validation.
//
// The CRD's pattern is deliberately loose (digits, then any letters): the unit is checked by
// ParseSize in the filter, and a size it cannot read makes the filter fail open with a warning on
// the route rather than the API server refusing the object.
type Config struct {
	// MaxSize is the largest request body let through, in bytes: a number with an optional
	// binary unit, case-insensitive: k (KiB, 1024), m (MiB), g (GiB), also spelled ki/mi/gi or
	// kib/mib/gib: "1048576", "512K", "10m", "1Gi". "kb", "mb" and "gb" are refused as
	// ambiguous (a kilobyte is 1000 bytes to some readers), and so are fractions. "0" admits
	// only requests without a body.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^\s*[0-9]+\s*[A-Za-z]*\s*$`
	// +required
	MaxSize string `json:"maxSize"`
}
