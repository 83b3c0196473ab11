package translator

import (
	"fmt"

	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// RouteContext is what a Route's Build sees: the listener it is built for, the core's backend
// resolution, and the way to report invalid input. Reports become Problems and route conditions.
type RouteContext struct {
	t        *translation
	key      RouteKey
	listener ListenerInfo
	parent   *parentState
}

// Listener is the Gateway listener the route is being built for.
func (rc *RouteContext) Listener() ListenerInfo { return rc.listener }

// DropRule leaves rule out of the table because it is invalid. The route stays Accepted with a
// PartiallyInvalid condition ("Dropped Rule ..."), or becomes Accepted=False with reason when no
// rule is left, as the Gateway API "Drop Rule(s)" approach specifies. Use it for values the spec
// says make a rule invalid (a bad regex, an impossible path modifier).
func (rc *RouteContext) DropRule(rule int, field string, reason gwapiv1.RouteConditionReason, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	rc.t.problem(rc.key, field, string(reason), msg)
	rc.parent.dropRule(rule, reason, field+": "+msg)
}

// Fail reports a problem that keeps the rule in the table (Build answers it with an error
// backend instead, so requests get an HTTP error and never skip what was asked): the condition
// cond of this parent turns False with reason.
func (rc *RouteContext) Fail(cond gwapiv1.RouteConditionType, field string, reason gwapiv1.RouteConditionReason, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	rc.t.problem(rc.key, field, string(reason), msg)
	rc.parent.fail(cond, reason, field+": "+msg)
}

// Backend resolves one backendRef of the route at field (e.g. "spec.rules[0].backendRefs[1]"):
// the Service and its EndpointSlices become a Cluster, a cross-namespace reference needs a
// ReferenceGrant. A reference that does not resolve gives a Backend with no cluster and an error
// (its share of traffic is answered 500) and sets ResolvedRefs=False with the spec's reason.
// filters are the backendRef's own filters, already translated.
func (rc *RouteContext) Backend(field string, ref gwapiv1.BackendRef, filters []*irv1.ModuleConfig) *irv1.Backend {
	weight := uint32(1)
	if ref.Weight != nil && *ref.Weight >= 0 {
		weight = uint32(*ref.Weight)
	}
	be := &irv1.Backend{Weight: weight, Filters: filters}
	cluster, reason, err := rc.t.resolveBackend(rc.key, ref.BackendObjectReference)
	if err != nil {
		rc.Fail(gwapiv1.RouteConditionResolvedRefs, field, reason, "%v", err)
		be.Error = err.Error()
		return be
	}
	be.Cluster = cluster
	return be
}
