package jwtauth

// ModuleID is the filter this package registers: the ExtensionRef filter for
// gateway.coxswain-labs.dev JwtAuth objects.
const ModuleID = "filter.ext.gateway.coxswain-labs.dev.JwtAuth"

// Spec is the spec of a JwtAuth object. The CRD's spec type in modules/api/v1alpha1 is this type,
// so the kubebuilder markers below are the CRD's validation. The module's config (Config) is the
// same fields with the keys resolved: the controller's resolver turns jwks.remote into the
// document it fetched, so that the proxy never fetches anything.
type Spec struct {
	Settings `json:",inline"`
	// JWKS is where the keys that sign valid tokens come from.
	// +required
	JWKS JWKSSource `json:"jwks"`
}

// Settings are the spec fields other than the keys: what a token must say and what the request
// carries upstream.
type Settings struct {
	// Issuer is what the token's iss claim must equal, exactly.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +required
	Issuer string `json:"issuer"`
	// Audiences, when set, are the accepted values of the token's aud claim: the token must
	// name at least one of them. Unset, aud is not checked.
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=2048
	// +optional
	Audiences []string `json:"audiences,omitempty"`
	// FromHeaders are where the token is looked for, in order; the first header present whose
	// value starts with its valuePrefix (compared without regard to case) carries it. Unset is
	// Authorization with "Bearer ". The query string is never read.
	// +kubebuilder:validation:MaxItems=8
	// +optional
	FromHeaders []TokenSource `json:"fromHeaders,omitempty"`
	// ClaimToHeaders copy claims of a verified token into request headers for the upstream. The
	// headers are removed from every incoming request first, so a client cannot forge them.
	// +kubebuilder:validation:MaxItems=16
	// +optional
	ClaimToHeaders []ClaimToHeader `json:"claimToHeaders,omitempty"`
	// ForwardPayloadHeader, when set, is a header that carries the token's payload (its
	// base64url middle part) upstream; it too is removed from incoming requests.
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9!#$%&'*+.^_|~-]+$`
	// +optional
	ForwardPayloadHeader string `json:"forwardPayloadHeader,omitempty"`
	// Forward keeps the token's header on the request sent upstream; by default it is removed.
	// +optional
	Forward bool `json:"forward,omitempty"`
}

// TokenSource is a request header that may carry the token.
type TokenSource struct {
	// Name of the header.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9!#$%&'*+.^_|~-]+$`
	// +required
	Name string `json:"name"`
	// ValuePrefix precedes the token in the value ("Bearer "); empty means the whole value is
	// the token.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	ValuePrefix string `json:"valuePrefix,omitempty"`
}

// ClaimToHeader copies one claim into one request header.
type ClaimToHeader struct {
	// Claim is a top-level claim name ("sub", "email", "https://example.com/roles"); dots are
	// part of the name, not a path. A string claim is copied as is; any other value as its
	// compact JSON. Control characters (CR, LF, NUL, ...) become spaces.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +required
	Claim string `json:"claim"`
	// Header is set to the claim's value, replacing whatever the client sent; a token without
	// the claim leaves it unset.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9!#$%&'*+.^_|~-]+$`
	// +required
	Header string `json:"header"`
}

// JWKSSource is where the keys come from: exactly one of remote and inline.
// +kubebuilder:validation:XValidation:rule="has(self.remote) != has(self.inline)",message="exactly one of remote and inline must be set"
type JWKSSource struct {
	// Remote is a JWKS the controller fetches and refreshes, and puts into the proxies' config.
	// +optional
	Remote *RemoteJWKS `json:"remote,omitempty"`
	// Inline is a JWKS document (JSON) itself.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=262144
	// +optional
	Inline string `json:"inline,omitempty"`
}

// RemoteJWKS is a JWKS at a URL.
type RemoteJWKS struct {
	// URI of the JWKS, http or https. It is fetched by the controller (or `coxswain serve`),
	// never by a proxy.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://[^\s]+$`
	// +required
	URI string `json:"uri"`
	// RefreshInterval is how often the JWKS is fetched again (5m when unset, at least 1s); a
	// response's Cache-Control max-age, when shorter, is used instead.
	// +kubebuilder:validation:Pattern=`^([0-9]{1,5}(h|m|s|ms)){1,4}$`
	// +optional
	RefreshInterval string `json:"refreshInterval,omitempty"`
}

// Config is the module's config: the spec with the keys resolved. The controller's resolver
// (package translate) writes jwks.inline with the document it fetched for jwks.remote, or, when
// it has none yet, jwks.unresolved with the reason; the module then answers 503 instead of
// verifying. A spec that reaches a proxy unresolved (a build without the resolver) is served the
// same way.
type Config struct {
	Settings `json:",inline"`
	JWKS     JWKS `json:"jwks"`
}

// JWKS is the resolved form of JWKSSource.
type JWKS struct {
	JWKSSource `json:",inline"`
	// Unresolved says why the keys are not known (set by the resolver only).
	Unresolved string `json:"unresolved,omitempty"`
}

// DeepCopyInto copies the spec into out, for the API type's generated deepcopy.
func (in *Spec) DeepCopyInto(out *Spec) {
	*out = *in
	out.Audiences = append([]string(nil), in.Audiences...)
	out.FromHeaders = append([]TokenSource(nil), in.FromHeaders...)
	out.ClaimToHeaders = append([]ClaimToHeader(nil), in.ClaimToHeaders...)
	if in.JWKS.Remote != nil {
		r := *in.JWKS.Remote
		out.JWKS.Remote = &r
	}
}
