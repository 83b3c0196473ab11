package translator

import (
	"fmt"

	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// RouteContext is what a Route's Build sees: the listener it is built for, the core's backend
// resolution, and the way to report invalid input. Reports become Problems and route
// conditions; the same report made twice (Build runs once per attached listener) counts once.
type RouteContext struct {
	t        *translation
	st       *routeState
	listener ListenerInfo
	// emit is false for the validation pass, which must not add clusters to the snapshot.
	emit bool
}

// Listener is the Gateway listener the route is being built for. During the validation pass,
// which runs once before attachment, it is the zero ListenerInfo.
func (rc *RouteContext) Listener() ListenerInfo { return rc.listener }

// DropRule leaves rule out of the table because it is invalid as written (a bad regex, a path
// modifier its match cannot support). Per the Gateway API "Drop Rule(s)" approach the route stays
// Accepted with a PartiallyInvalid condition, or turns Accepted=False with reason once no rule
// is left. field is the path in the object, e.g. "spec.rules[0].matches[1].path.value".
func (rc *RouteContext) DropRule(rule int, field string, reason gwapiv1.RouteConditionReason, format string, args ...any) {
	rc.st.invalidRule(rule, false, field, reason, fmt.Sprintf(format, args...))
}

// FailRule is DropRule for a rule that must not fall through to other rules either: its entries
// stay in the table, and Build makes them answer an error (ErrorBackend). Use it for a filter
// this build cannot run, which the spec forbids skipping.
func (rc *RouteContext) FailRule(rule int, field string, reason gwapiv1.RouteConditionReason, format string, args ...any) {
	rc.st.invalidRule(rule, true, field, reason, fmt.Sprintf(format, args...))
}

// Unresolved sets ResolvedRefs=False with reason for a reference the route keeps serving with an
// error (an unresolvable ExtensionRef, say). Backend calls it by itself.
func (rc *RouteContext) Unresolved(field string, reason gwapiv1.RouteConditionReason, format string, args ...any) {
	rc.st.unresolvedRef(field, reason, fmt.Sprintf(format, args...))
}

// Backend resolves one backendRef at field (e.g. "spec.rules[0].backendRefs[1]"): the Service's
// port and ready endpoints become a Cluster; a cross-namespace reference needs a ReferenceGrant.
// A reference that does not resolve gives a Backend with no cluster and an error, which the
// proxy answers with 500 for its share of traffic, and sets ResolvedRefs=False with the spec's
// reason. The weight defaults to 1; 0 is kept (never chosen). filters are the backendRef's own.
func (rc *RouteContext) Backend(field string, ref gwapiv1.BackendRef, filters []*irv1.ModuleConfig) *irv1.Backend {
	weight := uint32(1)
	if ref.Weight != nil && *ref.Weight >= 0 {
		weight = uint32(*ref.Weight)
	}
	be := &irv1.Backend{Weight: weight, Filters: filters}
	cluster, err := rc.t.resolveBackend(rc.st.key, ref.BackendObjectReference, clusterProtocol(rc.st.kind), rc.emit)
	if err != nil {
		rc.Unresolved(field, err.reason, "%s", err.msg)
		be.Error = err.msg
		return be
	}
	be.Cluster = cluster
	return be
}

// ErrorBackend is the backend of a rule that must answer an error: all its traffic gets 500.
func ErrorBackend(msg string) *irv1.Backend {
	return &irv1.Backend{Weight: 1, Error: msg}
}
