package basicauth

// ModuleID is the filter this package registers: the ExtensionRef filter for
// gateway.coxswain-labs.dev BasicAuth objects.
const ModuleID = "filter.ext.gateway.coxswain-labs.dev.BasicAuth"

// SecretLabel is the label a Secret needs, with the value "true", for a BasicAuth to use it; the
// controller watches only the Secrets that carry it (besides TLS ones), so a cluster's other
// Secrets never enter its memory. SecretKey is the data key of the htpasswd file.
const (
	SecretLabel = "ingress.coxswain-labs.dev/auth-basic"
	SecretKey   = "auth"
)

// Spec is the spec of a BasicAuth object. It is not the module's config: the controller-side
// resolver (package translate) reads the Secret it names and hands the proxy a Config with the
// parsed users instead, so the proxy never sees the Secret. The CRD's spec type in
// modules/api/v1alpha1 is this type, so the kubebuilder markers below are the CRD's validation.
type Spec struct {
	// SecretRef names the Secret holding the htpasswd file under the key "auth". The Secret must
	// carry the label ingress.coxswain-labs.dev/auth-basic: "true". One in another namespace
	// needs a ReferenceGrant there from BasicAuth (group gateway.coxswain-labs.dev) to Secret.
	// +required
	SecretRef SecretRef `json:"secretRef"`
	// Realm is the realm of the WWW-Authenticate challenge; the default is the BasicAuth's
	// "<namespace>/<name>".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[^"\\\x00-\x1f\x7f]+$`
	// +optional
	Realm string `json:"realm,omitempty"`
	// ForwardCredentials keeps the Authorization header on the request sent upstream; by
	// default it is removed once the credentials are checked.
	// +kubebuilder:default=false
	// +optional
	ForwardCredentials bool `json:"forwardCredentials,omitempty"`
}

// SecretRef is a reference to a Secret.
type SecretRef struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
	// Namespace of the Secret; the default is the BasicAuth's.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// Config is the module's config, as the resolver writes it. Exactly one of Users and Closed is
// set: a BasicAuth whose Secret cannot be used still serves its rule, answering every request
// with 503, rather than letting requests through or failing the rule with 500.
type Config struct {
	// Realm is the WWW-Authenticate realm, already defaulted.
	Realm string `json:"realm"`
	// ForwardCredentials keeps the Authorization header upstream.
	ForwardCredentials bool `json:"forwardCredentials,omitempty"`
	// Users are the accepted users, sorted by name, each with the hash its htpasswd line had.
	Users []User `json:"users,omitempty"`
	// Closed is why the filter cannot check credentials (the Secret is missing, unlabelled, not
	// permitted or holds no usable entry). The proxy logs it; clients get 503 without it.
	Closed string `json:"closed,omitempty"`
}

// User is one htpasswd entry.
type User struct {
	Name string `json:"name"`
	// Hash is a bcrypt hash ($2a$, $2b$ or $2y$) or an unsalted SHA-1 one ({SHA}base64).
	Hash string `json:"hash"`
}
