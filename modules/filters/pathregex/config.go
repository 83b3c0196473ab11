package pathregex

// ModuleID is the filter this package registers: the ExtensionRef filter for
// gateway.coxswain-labs.dev PathRewriteRegex objects.
const ModuleID = "filter.ext.gateway.coxswain-labs.dev.PathRewriteRegex"

// Config is the spec of a PathRewriteRegex object and, byte for byte, the module's config: the
// controller copies the object's .spec into the ModuleConfig verbatim. The CRD's spec type in
// modules/api/v1alpha1 is this type, so the kubebuilder markers below are the CRD's validation.
type Config struct {
	// Pattern is an RE2 regular expression matched against the request path as it is sent on the
	// wire (escaped, without the query). It is not anchored: use ^ and $ to anchor it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +required
	Pattern string `json:"pattern"`
	// Substitution replaces every match of Pattern, with Go's regexp.ReplaceAllString expansion:
	// $1 or ${1} is a numbered group, ${name} a named one, $$ a literal $. Empty deletes the match.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Substitution string `json:"substitution,omitempty"`
}
