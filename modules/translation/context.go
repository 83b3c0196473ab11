package translation

import (
	"fmt"

	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// RouteContext is what a Route's Build sees: the listener it is built for, the core's backend and
// filter translation, and the way to report invalid input. Reports become Problems and route
// conditions; the same report made twice (Build runs once per attached listener) counts once.
// The translator implements it; modules only call it.
type RouteContext interface {
	// Listener is the Gateway listener the route is being built for. During the validation pass,
	// which runs once before attachment, it is the zero ListenerInfo.
	Listener() ListenerInfo
	// DropRule leaves rule out of the table because it is invalid as written (a bad regex, a
	// path modifier its match cannot support). Per the Gateway API "Drop Rule(s)" approach the
	// route stays Accepted with a PartiallyInvalid condition, or turns Accepted=False once no
	// rule is left. field is the path in the object, e.g. "spec.rules[0].matches[1].path.value".
	DropRule(rule int, field string, reason gwapiv1.RouteConditionReason, format string, args ...any)
	// FailRule is DropRule for a rule that must not fall through to other rules either: its
	// entries stay in the table and answer an error (ErrorBackend). Use it for a filter this
	// build cannot run, which the spec forbids skipping.
	FailRule(rule int, field string, reason gwapiv1.RouteConditionReason, format string, args ...any)
	// Unresolved sets ResolvedRefs=False with reason for a reference the route keeps serving
	// with an error (an unresolvable ExtensionRef, say). Backend and Filters call it themselves.
	Unresolved(field string, reason gwapiv1.RouteConditionReason, format string, args ...any)
	// Warn reports something accepted but not served as written (a field ignored, an entry
	// skipped): the route stays as it is, and the message joins its ResolvedRefs condition and
	// the translation's Warnings, so that it is never silent.
	Warn(field string, format string, args ...any)
	// Backend resolves one backendRef at field (e.g. "spec.rules[0].backendRefs[1]"): the
	// Service's port and ready endpoints become a Cluster; a cross-namespace reference needs a
	// ReferenceGrant. One that does not resolve gives a Backend with no cluster and an error,
	// which the proxy answers with 500 for its share of traffic, and sets ResolvedRefs=False.
	// The weight defaults to 1; 0 is kept (never chosen). filters are the backendRef's own.
	Backend(field string, ref gwapiv1.BackendRef, filters []*irv1.ModuleConfig) *irv1.Backend
	// BackendWith is Backend for a route kind whose objects carry settings of the cluster itself
	// (an Ingress's load-balance and connect-timeout annotations). A setting the Service's
	// CoxswainBackendPolicy makes wins, and the route is warned that its own is ignored; the
	// others shape a variant of the Service port's cluster, named after them, so that routes
	// without them keep the plain one. An algorithm the build cannot serve is warned about at
	// s.AlgorithmField and ignored (round robin).
	BackendWith(field string, ref gwapiv1.BackendRef, filters []*irv1.ModuleConfig, s ClusterSettings) *irv1.Backend
	// Filters translates one filter list (field is its path, e.g. "spec.rules[0].filters") into
	// module configs, in order: each standard filter type by its registered FilterTranslator,
	// each ExtensionRef by its filter.ext.* module. GRPCRoute filters are passed as the
	// HTTPRouteFilters they are a subset of (GRPCFilters). A list that cannot be served gives a
	// Failure, which the caller turns into FailRule or, when Failure.Unresolved, into an error
	// answer with ResolvedRefs=False (Failure.Report does both).
	Filters(field string, filters []gwapiv1.HTTPRouteFilter, env FilterEnv) ([]*irv1.ModuleConfig, *Failure)
}

// ClusterSettings are a route's own settings of the clusters its backends resolve to. The zero
// value asks for nothing.
type ClusterSettings struct {
	// ConnectTimeoutMs bounds the connect to an endpoint (IR Cluster.connect_timeout_ms); 0 for
	// the proxy's default.
	ConnectTimeoutMs uint32
	// Algorithm is a CoxswainBackendPolicy spec.loadBalancer.algorithm ("least_conn",
	// "hash:header=x-user", ...); "" for the default, round robin.
	Algorithm string
	// ConnectTimeoutField and AlgorithmField are where the route sets them, for warnings
	// ("metadata.annotations[...]").
	ConnectTimeoutField, AlgorithmField string
}

// IsZero reports whether s asks for nothing.
func (s ClusterSettings) IsZero() bool { return s.ConnectTimeoutMs == 0 && s.Algorithm == "" }

// FilterEnv is what filter translation knows about the rule and the listener.
type FilterEnv struct {
	// Kind is the route kind the filters belong to ("HTTPRoute"), for messages and for
	// translators that serve only some kinds.
	Kind string
	// Types are the filter types the route kind has; a filter of another type is
	// UnsupportedValue. Nil allows every type.
	Types []gwapiv1.HTTPRouteFilterType
	// Listener is the listener the rule is built for (zero in the validation pass).
	Listener ListenerInfo
	// Prefix is the PathPrefix value ReplacePrefixMatch replaces; HasPrefix says the rule has
	// the single PathPrefix match the API requires for ReplacePrefixMatch.
	Prefix    string
	HasPrefix bool
	// Route is the route object the filters belong to, "<Kind>/<namespace>/<name>" (the route
	// label of the proxy's per-route metrics). The core sets it; route kinds leave it empty.
	Route string
	// Backends resolves the Services a filter sends traffic of its own to (a RequestMirror's
	// backendRef). The core sets it; route kinds leave it nil.
	Backends FilterBackends
}

// FilterBackends resolves a backend a filter sends traffic to, as the rule's own backendRefs are
// resolved (filterbackend.go in the translator).
type FilterBackends interface {
	// Backend resolves ref at field (a Service port; another namespace needs a ReferenceGrant
	// from the route) to the name of its cluster, of the protocol the route kind's backendRefs
	// use, and keeps the cluster in the snapshot. A reference that does not resolve sets the
	// route's ResolvedRefs=False with the spec's reason and returns ok false: the caller leaves
	// that backend out, and the rule keeps serving.
	Backend(field string, ref gwapiv1.BackendObjectReference) (cluster string, ok bool)
}

// Failure is why a filter list or a rule cannot be served as written. With Unresolved set it is a
// reference that does not resolve (ResolvedRefs=False); otherwise the rule fails (FailRule).
// Either way the rule's routes answer an error.
type Failure struct {
	Field      string
	Reason     gwapiv1.RouteConditionReason
	Message    string
	Unresolved bool
}

// Fail is a Failure of the rule at field.
func Fail(field string, reason gwapiv1.RouteConditionReason, format string, args ...any) *Failure {
	return &Failure{Field: field, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

func (f *Failure) Error() string {
	if f.Field == "" { // a resolver's (ResolveContext.Secret): the caller knows the field
		return f.Message
	}
	return f.Field + ": " + f.Message
}

// Report records f against rule: ResolvedRefs=False when it is an unresolved reference, else a
// failed rule; either way the caller serves the rule with ErrorBackend(f).
func (f *Failure) Report(rc RouteContext, rule int) {
	if f.Unresolved {
		rc.Unresolved(f.Field, f.Reason, "%s", f.Message)
		return
	}
	rc.FailRule(rule, f.Field, f.Reason, "%s", f.Message)
}

// ErrorBackend is the backend of a rule that must answer an error: all its traffic gets 500 (or
// the route kind's ErrorAnswer).
func ErrorBackend(msg string) *irv1.Backend {
	return &irv1.Backend{Weight: 1, Error: msg}
}

// GRPCFilters converts GRPCRoute filters to the HTTPRouteFilters they are a subset of (the same
// field types), so that every route kind shares one filter path.
func GRPCFilters(fs []gwapiv1.GRPCRouteFilter) []gwapiv1.HTTPRouteFilter {
	if fs == nil {
		return nil
	}
	out := make([]gwapiv1.HTTPRouteFilter, len(fs))
	for i, f := range fs {
		out[i] = gwapiv1.HTTPRouteFilter{
			Type:                   gwapiv1.HTTPRouteFilterType(f.Type),
			RequestHeaderModifier:  f.RequestHeaderModifier,
			ResponseHeaderModifier: f.ResponseHeaderModifier,
			RequestMirror:          f.RequestMirror,
			ExtensionRef:           f.ExtensionRef,
		}
	}
	return out
}
