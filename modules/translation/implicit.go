package translation

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapiv1b1 "sigs.k8s.io/gateway-api/apis/v1beta1"
)

// An implicit Gateway's spec.tls.frontend validation may name a Secret (key ca.crt) besides the
// ConfigMaps and ClusterTrustBundles an operator's Gateway may: a route kind's CA lives in a
// Secret (an Ingress's auth-tls-secret), and the ReferenceGrants the kind returns name it.

// ImplicitNamespace is the namespace of the Gateways an ImplicitParentKind asks for. It is not a
// DNS label, so no object of a cluster or a manifest can live in it: nothing but the kind's own
// routes can attach to those Gateways, and no ReferenceGrant an operator writes names them.
const ImplicitNamespace = "implicit.coxswain"

// Annotations of an implicit Gateway that tune its spec.tls.frontend validation beyond what the
// Gateway API says (an Ingress's auth-tls-verify-depth and auth-tls-pass-certificate-to-upstream).
// The core reads them on Gateways of ImplicitNamespace only, so no operator's object sets them.
const (
	// ImplicitVerifyDepthAnnotation is the most intermediate certificates a client chain may
	// hold (a decimal integer ≥ 1; IR ClientValidation.verify_depth).
	ImplicitVerifyDepthAnnotation = "implicit.coxswain/client-verify-depth"
	// ImplicitCertificateHeaderAnnotation names the request header that carries the verified
	// client certificate to the upstream (IR ClientValidation.certificate_header).
	ImplicitCertificateHeaderAnnotation = "implicit.coxswain/client-certificate-header"
)

// ImplicitClassPrefix begins the name of every implicit GatewayClass ("implicit.coxswain/ingress");
// the slash keeps it apart from any class an API server could hold.
const ImplicitClassPrefix = "implicit.coxswain/"

// ImplicitParentKind is a route kind whose objects name no parent (networking.k8s.io Ingress):
// the core adds the GatewayClass, Gateways and ReferenceGrants it returns to the world of one
// translation, in ImplicitNamespace, and the kind's routes name those Gateways in ParentRefs.
// Attachment, TLS, socket sharing and the snapshot are then the Gateway code's; the implicit
// objects' own statuses are never written.
type ImplicitParentKind interface {
	RouteKind
	// ImplicitParents returns the parents for the kind's objects in world. It must be
	// deterministic.
	ImplicitParents(world ImplicitWorld) ImplicitParents
	// Companions are the further resources the kind reads (IngressClass): the controller
	// watches them and the file loader reads them into the Store's Objects.
	Companions() []CompanionAPI
	// YieldsToGatewayAPI says the kind's routes give up a hostname that a Gateway API route or
	// a Gateway listener hostname serves on a shared socket (ImplicitParents' Listener lists
	// which); the core reports each such hostname on the route with Warn.
	YieldsToGatewayAPI() bool
	// RuleHostnames are the hostnames r's rules name, also when r's Hostnames is nil because a
	// rule without one (or a default backend) makes it serve any host.
	RuleHostnames(r Route) []string
}

// ImplicitWorld is what ImplicitParents sees.
type ImplicitWorld struct {
	// ControllerName is the GatewayClass controllerName this translation serves.
	ControllerName string
	// Settings are the translator's KindSettings ("ingress.http-address" = "0.0.0.0:80").
	Settings map[string]string
	// Objects returns the Store's objects of gk (the kind's routes, its companions).
	Objects func(gk schema.GroupKind) []Object
	// Secret reports whether the Store holds Secret namespace/name.
	Secret func(namespace, name string) bool
	// SecretData is key of Secret namespace/name (nil when either is missing): for a kind that
	// checks what it will ask the core to read (a CA bundle) and reports on its own object.
	SecretData func(namespace, name, key string) []byte
}

// ImplicitParents is what the core adds to a translation for an ImplicitParentKind.
type ImplicitParents struct {
	Class           *gwapiv1.GatewayClass
	Gateways        []*gwapiv1.Gateway
	ReferenceGrants []*gwapiv1b1.ReferenceGrant
}

// CompanionAPI is a resource a route kind reads besides its routes.
type CompanionAPI struct {
	GVK        schema.GroupVersionKind
	Resource   string
	Namespaced bool
	// AddToScheme registers the Go types of GVK and its list.
	AddToScheme func(*runtime.Scheme) error
	New         func() Object
}
