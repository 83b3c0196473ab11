package hmacsign

// ModuleID is the module this package registers: the ExtensionRef filter for
// hmacsign.example.com HMACSignature objects.
const ModuleID = "filter.ext.hmacsign.example.com.HMACSignature"

// DefaultHeader is the request header the signature goes in when spec.header is empty.
const DefaultHeader = "x-signature"

// Config is the spec of an HMACSignature object and the module's config: the controller copies
// the object's .spec verbatim and the proxy decodes it strictly into this type. The CRD
// (api/v1, crds/) is generated from it, so the markers below are its validation.
type Config struct {
	// Header is the request header that carries the signature; the key ID, when set, goes in
	// "<header>-key-id".
	// +kubebuilder:default=x-signature
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=200
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9!#$%&'*+.^_|~-]+$`
	// +optional
	Header string `json:"header,omitempty"`
	// Key is the HMAC-SHA256 key, used as its UTF-8 bytes. This example keeps it in the spec to
	// stay small; a production filter would reference a Secret and resolve it in the controller.
	// +kubebuilder:validation:MinLength=1
	// +required
	Key string `json:"key"`
	// KeyID names the key to the backend, so keys can rotate; empty sends no key ID header.
	// +kubebuilder:validation:MaxLength=200
	// +kubebuilder:validation:Pattern=`^[\x21-\x7e]*$`
	// +optional
	KeyID string `json:"keyID,omitempty"`
}
