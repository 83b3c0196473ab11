package translator

import (
	"fmt"

	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// routeContext is the translation.RouteContext a Route's Build gets: one per route and listener
// (none in the validation pass). Reports go to the route's state, which deduplicates them.
type routeContext struct {
	t        *session
	st       *routeState
	listener translation.ListenerInfo
	// ls is the listener being built (nil in the validation pass).
	ls *listenerState
	// emit is false for the validation pass, which must not add clusters to the snapshot.
	emit bool
}

var _ translation.RouteContext = (*routeContext)(nil)

func (rc *routeContext) Listener() translation.ListenerInfo { return rc.listener }

func (rc *routeContext) DropRule(rule int, field string, reason gwapiv1.RouteConditionReason, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	rc.st.rec.effect(buildEffect{kind: effectDrop, rule: rule, field: field, reason: reason, msg: msg})
	rc.st.invalidRule(rule, false, field, reason, msg)
}

func (rc *routeContext) FailRule(rule int, field string, reason gwapiv1.RouteConditionReason, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	rc.st.rec.effect(buildEffect{kind: effectFail, rule: rule, field: field, reason: reason, msg: msg})
	rc.st.invalidRule(rule, true, field, reason, msg)
}

func (rc *routeContext) Unresolved(field string, reason gwapiv1.RouteConditionReason, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	rc.st.rec.effect(buildEffect{kind: effectUnresolved, field: field, reason: reason, msg: msg})
	rc.st.unresolvedRef(field, reason, msg)
}

func (rc *routeContext) Warn(field string, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	rc.st.rec.effect(buildEffect{kind: effectWarn, field: field, msg: msg})
	rc.st.warn(field, msg)
}

func (rc *routeContext) Backend(field string, ref gwapiv1.BackendRef, filters []*irv1.ModuleConfig) *irv1.Backend {
	return rc.backend(field, ref, filters, nil)
}

func (rc *routeContext) BackendWith(field string, ref gwapiv1.BackendRef, filters []*irv1.ModuleConfig, s translation.ClusterSettings) *irv1.Backend {
	return rc.backend(field, ref, filters, rc.routeClusterFor(ref.BackendObjectReference, s))
}

func (rc *routeContext) backend(field string, ref gwapiv1.BackendRef, filters []*irv1.ModuleConfig, own *routeCluster) *irv1.Backend {
	weight := uint32(1)
	if ref.Weight != nil && *ref.Weight >= 0 {
		weight = uint32(*ref.Weight)
	}
	be := &irv1.Backend{Weight: weight, Filters: filters}
	cluster, err := rc.t.resolveBackend(rc.st.key, ref.BackendObjectReference, clusterProtocol(rc.st.kind), rc.emit, rc.ls, own)
	if err != nil {
		rc.Unresolved(field, err.reason, "%s", err.msg)
		be.Error = err.msg
		return be
	}
	be.Cluster = cluster
	return be
}

func (rc *routeContext) Filters(field string, fs []gwapiv1.HTTPRouteFilter, env translation.FilterEnv) ([]*irv1.ModuleConfig, *translation.Failure) {
	return rc.t.filters(rc, field, fs, env)
}
