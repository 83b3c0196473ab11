package translation

import (
	"encoding/json"
	"time"

	corev1 "k8s.io/api/core/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// FilterNamespace is the module namespace of filter translators.
const FilterNamespace = "translate.filter"

// FilterTranslator is the controller half of one Gateway API filter type, registered as module
// "translate.filter.<name>" next to the filter.http.* module it builds the config of. The core
// calls it for every filter of that type on every route kind whose FilterEnv allows it, after
// checking the rules every filter list keeps (which types may repeat, which combine).
type FilterTranslator interface {
	core.Module
	// FilterType is the filter type translated ("RequestHeaderModifier").
	FilterType() gwapiv1.HTTPRouteFilterType
	// TranslateFilter validates f as the API server would (standalone files never met one) and
	// returns its module config. field is f's path ("spec.rules[0].filters[1]").
	TranslateFilter(env FilterEnv, f gwapiv1.HTTPRouteFilter, field string) (*irv1.ModuleConfig, *Failure)
}

// ExtensionResolverNamespace is where a filter.ext.<group>.<Kind> module's optional resolver
// registers: "translate.filter.ext.<group>.<Kind>".
const ExtensionResolverNamespace = "translate." + core.ExtensionNamespace

// ExtensionResolverID is the resolver module of the ExtensionRef filter module id.
func ExtensionResolverID(id core.ModuleID) core.ModuleID {
	return core.ModuleID("translate." + string(id))
}

// ExtensionResolver is optionally registered by an ExtensionRef filter whose config needs the
// controller: references to resolve (Secrets, ReferenceGrant checks), remote documents to fetch.
// It runs in the controller (or the serve process) and returns the config the proxy module
// decodes; the proxy never reads the Kubernetes API. Without a resolver the referenced object's
// .spec is the config as it is.
type ExtensionResolver interface {
	core.Module
	// Resolve returns the module config for the referenced object, whose .spec is spec. An
	// error is reported on the route (ResolvedRefs=False, with its reason when it is a
	// *Failure) and the rule answers 500; ResolveContext.Unresolved reports a reference that
	// does not resolve without failing the rule.
	Resolve(rc ResolveContext, obj Object, spec json.RawMessage) (json.RawMessage, error)
}

// SecretSelector is optionally implemented by an ExtensionResolver that reads Secrets other than
// TLS ones (which the controller always watches). The controller watches, besides, the Secrets
// matching the label selector it returns ("ingress.coxswain-labs.dev/auth-basic=true"), and
// nothing else: a cluster's other Secrets never enter its memory. Standalone files have every
// Secret they hold.
type SecretSelector interface {
	SecretLabelSelector() string
}

// ResolveContext is what a resolver may read: the objects the controller holds, with the
// ReferenceGrant rules applied for it.
type ResolveContext interface {
	// Namespace is the namespace of the route (and of the referenced filter object).
	Namespace() string
	// Secret returns the Secret namespace/name, or an error that says why it cannot be used
	// (missing; in another namespace than the filter object without a ReferenceGrant from
	// group/kind of the filter object to Secrets).
	Secret(namespace, name string) (*corev1.Secret, error)
	// Warn reports something in the object accepted but not served as written; it shows on the
	// route (RouteContext.Warn) at the ExtensionRef's field.
	Warn(format string, args ...any)
	// Unresolved sets the route's ResolvedRefs=False with reason (at the ExtensionRef's field)
	// while the config Resolve returns is still served. It is for a filter that fails closed on
	// its own: an authentication filter whose credentials Secret is missing returns a config
	// that makes the proxy answer 503, and says why here, where returning an error would make
	// the rule answer 500 instead (JwtAuth's 503 until its JWKS is fetched is the same).
	Unresolved(reason gwapiv1.RouteConditionReason, format string, args ...any)
	// Document returns the body of the remote document at uri (an https or http URL: a JWKS),
	// as the controller last fetched it. The controller — never a proxy — fetches a URI from
	// the first translation that asks for it, then every refresh (or sooner when the server's
	// Cache-Control max-age says so), keeps the last good body when a refresh fails, and
	// translates again when the body changes. Until a first fetch succeeds it returns an error
	// that says why (not fetched yet, or the fetch's failure).
	Document(uri string, refresh time.Duration) ([]byte, error)
	// Backend resolves ref, a Service port the filter object calls (an external authorization
	// service), as a route's backendRef is resolved: a Service in another namespace than the
	// filter object needs a ReferenceGrant from the object's group and kind to Services. It puts
	// the port's cluster in the snapshot and returns the cluster's name, which the proxy module
	// looks up (core.BuildContext.Clusters). h2c asks for the cleartext HTTP/2 cluster (a gRPC
	// service). The error says why the reference does not resolve.
	Backend(ref gwapiv1.BackendObjectReference, h2c bool) (cluster string, err error)
}

// RouteReasonSecretNotFound is the ResolvedRefs reason of a filter whose Secret does not exist
// (ResolveContext.Secret). Gateway API names none for a Secret a route's filter refers to.
const RouteReasonSecretNotFound gwapiv1.RouteConditionReason = "SecretNotFound"

// Documents is the controller's source of remote documents (ResolveContext.Document).
type Documents interface {
	Document(uri string, refresh time.Duration) ([]byte, error)
}

// ResolvingFilterTranslator is a FilterTranslator whose filter refers to other objects (the
// Service an ExternalAuth filter calls). The core calls TranslateResolved instead of
// TranslateFilter, with a ResolveContext whose references are judged from the object that holds
// the filter (the route, or the Gateway of a listener filter): a Service in another namespace
// needs a ReferenceGrant from that object's kind.
type ResolvingFilterTranslator interface {
	FilterTranslator
	TranslateResolved(rc ResolveContext, env FilterEnv, f gwapiv1.HTTPRouteFilter, field string) (*irv1.ModuleConfig, *Failure)
}
