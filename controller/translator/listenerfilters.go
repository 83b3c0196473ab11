package translator

import (
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// Listener filters (GEP-5224, Gateway API listeners[].filters.requests, experimental): the
// ExternalAuth and ExtensionRef filters of a listener run on every request it takes, in list
// order, before routing (the proxy's Server.filters). They are translated by the very modules
// that translate a route's filters — t.filter, with an ExtensionRef resolved in the listener's
// own namespace — so every filter.ext.* kind (IpAccessControl, RateLimit, JwtAuth, BasicAuth,
// CoxswainExternalAuth and its ExternalAuth alias) and the ExternalAuth filter type work here
// with no code of their own.
//
// Nothing here depends on the listener belonging to a Gateway: it reads the listener's spec
// (gwapiv1.Listener and ListenerSet's entries carry the same ListenerFilters) and reports on its
// listenerState. Status, as the GEP asks, only when filters.requests is the cause:
//   - a filter that cannot be served as written (unsupported type, invalid spec, a listener
//     protocol without HTTP requests): Accepted=False, UnsupportedValue for a type or kind this
//     build lacks, else InvalidListenerFilter; the listener is not served.
//   - a reference that does not resolve (a missing ExtensionRef object, an auth backend that
//     does not exist or needs a ReferenceGrant): ResolvedRefs=False, InvalidListenerFilterRef or
//     RefNotPermitted. A filter that fails closed on its own (an auth filter whose backend is
//     missing answers 503) keeps the listener served; any other is not: a listener is never
//     served without a filter it names.
// Two listeners merged into one Server (same address, port, protocol and hostname, across
// Gateways) must agree on their filters: the newer one is Conflicted (conflicts.go).

// Listener condition reasons of GEP-5224. The v1.7.0 API package names none of them.
const (
	ListenerReasonInvalidListenerFilter      gwapiv1.ListenerConditionReason = "InvalidListenerFilter"
	ListenerReasonInvalidListenerFilterOrder gwapiv1.ListenerConditionReason = "InvalidListenerFilterOrder"
	ListenerReasonInvalidListenerFilterRef   gwapiv1.ListenerConditionReason = "InvalidListenerFilterRef"
)

// listenerFilterTypes are the HTTPRouteFilter types a ListenerFilter can be.
var listenerFilterTypes = []gwapiv1.HTTPRouteFilterType{gwapiv1.HTTPRouteFilterExternalAuth, gwapiv1.HTTPRouteFilterExtensionRef}

// listenerFilters translates l's filters.requests into l.filters.
func (t *session) listenerFilters(l *listenerState, spec *gwapiv1.ListenerFilters) {
	if spec == nil || len(spec.Requests) == 0 || !l.accepted.ok {
		return
	}
	base := l.field("filters.requests")
	if !httpRequests(l) {
		t.rejectListener(l, "filters", ListenerReasonInvalidListenerFilter,
			fmt.Sprintf("filters.requests run on HTTP requests: they are valid on HTTP listeners and HTTPS listeners that terminate TLS, not on a %s listener", protocolWithMode(l)))
		return
	}
	// The listener's filters are judged as a route's are, in the listener owner's namespace; a
	// synthetic route state collects what the shared filter path reports.
	owner := &routeState{key: l.filterOwner()}
	rc := &routeContext{t: t, st: owner, emit: true, listener: translation.ListenerInfo{
		Gateway: l.gw.key.String(), Name: l.spec.Name, Protocol: l.spec.Protocol, Port: uint32(l.spec.Port), Hostname: l.hostname,
	}}
	env := translation.FilterEnv{Types: listenerFilterTypes, Listener: rc.listener}
	var out []*irv1.ModuleConfig
	for i, lf := range spec.Requests {
		field := fmt.Sprintf("%s[%d]", base, i)
		f := gwapiv1.HTTPRouteFilter{Type: gwapiv1.HTTPRouteFilterType(lf.Type), ExternalAuth: lf.ExternalAuth, ExtensionRef: lf.ExtensionRef}
		if !slices.Contains(listenerFilterTypes, f.Type) {
			t.rejectListener(l, "filters", gwapiv1.ListenerReasonUnsupportedValue,
				fmt.Sprintf("%s.type: %q is not a listener filter type (ExternalAuth, ExtensionRef)", field, lf.Type))
			return
		}
		mc, fail := t.filter(rc, f, field, env)
		if fail != nil {
			t.listenerFilterFailed(l, fail)
			return
		}
		if mc == nil {
			// A fail-open ExtensionRef whose object is missing: a listener filter is never
			// skipped, so the listener is not served (ResolvedRefs says why).
			t.listenerFilterUnresolved(l, owner)
			l.filtersFailed = true
			return
		}
		out = append(out, mc)
	}
	if owner.unresolved != nil {
		t.listenerFilterUnresolved(l, owner) // served: the filter answers 503 by itself
	}
	for _, w := range owner.warnings {
		t.listenerProblem(l, w.Field, gwapiv1.ListenerConditionReason(w.Reason), w.Message)
	}
	l.filters = out
}

// filterOwner is the object whose listener this is: its namespace is where ExtensionRefs are
// looked up, its kind what a ReferenceGrant for the filters' own references names. A ListenerSet
// listener's owner is the ListenerSet (the one place that changes when ListenerSets merge).
func (l *listenerState) filterOwner() RouteKey {
	if l.owner != nil {
		return RouteKey{Group: gwapiv1.GroupName, Kind: listenerSetKind, Namespace: l.owner.key.Namespace, Name: l.owner.key.Name}
	}
	return RouteKey{Group: gwapiv1.GroupName, Kind: "Gateway", Namespace: l.gw.key.Namespace, Name: l.gw.key.Name}
}

// httpRequests reports whether l sees HTTP requests: HTTP, or HTTPS terminating TLS.
func httpRequests(l *listenerState) bool {
	switch l.spec.Protocol {
	case gwapiv1.HTTPProtocolType:
		return true
	case gwapiv1.HTTPSProtocolType:
		return !l.passthrough
	}
	return false
}

func protocolWithMode(l *listenerState) string {
	if l.passthrough {
		return string(l.spec.Protocol) + " (passthrough)"
	}
	return string(l.spec.Protocol)
}

// listenerFilterFailed reports a filter that cannot be served; the listener is not served.
func (t *session) listenerFilterFailed(l *listenerState, f *translation.Failure) {
	l.filtersFailed = true
	msg := f.Field + ": " + f.Message
	if f.Unresolved {
		reason := ListenerReasonInvalidListenerFilterRef
		if f.Reason == gwapiv1.RouteReasonRefNotPermitted {
			reason = gwapiv1.ListenerReasonRefNotPermitted
		}
		t.unresolvedListenerAt(l, f.Field, reason, msg)
		return
	}
	reason := ListenerReasonInvalidListenerFilter
	if f.Reason == gwapiv1.RouteReasonUnsupportedValue || f.Reason == gwapiv1.RouteReasonInvalidKind {
		reason = gwapiv1.ListenerReasonUnsupportedValue
	}
	if l.accepted.ok {
		l.accepted = condState{reason: string(reason), msg: msg}
	}
	t.gatewayProblem(l.gw, f.Field, string(reason), f.Message)
}

// listenerFilterUnresolved reports the references the filter path found unresolved.
func (t *session) listenerFilterUnresolved(l *listenerState, owner *routeState) {
	reason := ListenerReasonInvalidListenerFilterRef
	if owner.unresolved.reason == string(gwapiv1.RouteReasonRefNotPermitted) {
		reason = gwapiv1.ListenerReasonRefNotPermitted
	}
	for _, p := range owner.problems {
		t.gatewayProblem(l.gw, p.Field, string(reason), p.Message)
	}
	if l.resolved.ok {
		l.resolved = condState{reason: string(reason), msg: owner.unresolved.msg}
	}
}

func (t *session) unresolvedListenerAt(l *listenerState, field string, reason gwapiv1.ListenerConditionReason, msg string) {
	if l.resolved.ok {
		l.resolved = condState{reason: string(reason), msg: msg}
	}
	t.gatewayProblem(l.gw, field, string(reason), msg)
}

// sameListenerFilters reports whether two listeners run the same filters (they may share a Server).
func sameListenerFilters(a, b *listenerState) bool {
	return slices.EqualFunc(a.filters, b.filters, func(x, y *irv1.ModuleConfig) bool { return proto.Equal(x, y) })
}
