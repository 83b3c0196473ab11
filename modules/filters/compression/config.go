package compression

// ModuleID is the filter this package registers: the ExtensionRef filter for
// gateway.coxswain-labs.dev Compression objects.
const ModuleID = "filter.ext.gateway.coxswain-labs.dev.Compression"

// Defaults of the fields left out. The CRD applies the same ones (its default markers); the
// module applies them too, for standalone files, which no API server defaults.
const (
	DefaultLevel   = 6
	DefaultMinSize = 1024
)

// DefaultTypes are the media types compressed when Types is empty.
var DefaultTypes = []string{"text/html", "text/plain", "text/css", "application/json", "application/javascript"}

// Config is the spec of a Compression object and, byte for byte, the module's config: the
// controller copies the object's .spec into the ModuleConfig verbatim. The CRD's spec type in
// modules/api/v1alpha1 is this type, so the kubebuilder markers below are the CRD's validation.
type Config struct {
	// Gzip enables gzip (Content-Encoding: gzip). The default is true.
	// +kubebuilder:default=true
	// +optional
	Gzip *bool `json:"gzip,omitempty"`
	// Brotli enables brotli (Content-Encoding: br), chosen over gzip when the client accepts
	// both equally.
	// +optional
	Brotli bool `json:"brotli,omitempty"`
	// Level is the compression level, 1 (fastest) to 9 (smallest), for gzip and brotli alike
	// (brotli's quality of the same number).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=9
	// +kubebuilder:default=6
	// +optional
	Level int32 `json:"level,omitempty"`
	// MinSize is the smallest response body, in bytes, that is compressed: a smaller one is sent
	// as it is, compression would gain little. Without a Content-Length, up to MinSize bytes are
	// held back to decide.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1048576
	// +kubebuilder:default=1024
	// +optional
	MinSize *int32 `json:"minSize,omitempty"`
	// Types are the media types compressed ("text/html", or "text/*" for a whole top-level
	// type), compared without their parameters. The default is text/html, text/plain, text/css,
	// application/json and application/javascript. application/grpc is never compressed.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=127
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*/([A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*|\*)$`
	// +listType=set
	// +optional
	Types []string `json:"types,omitempty"`
}

// DeepCopyInto copies c into out, for the generated deepcopy of the API type whose spec c is.
func (c *Config) DeepCopyInto(out *Config) {
	*out = *c
	if c.Gzip != nil {
		v := *c.Gzip
		out.Gzip = &v
	}
	if c.MinSize != nil {
		v := *c.MinSize
		out.MinSize = &v
	}
	if c.Types != nil {
		out.Types = append([]string(nil), c.Types...)
	}
}
