package translator

import (
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

func (t *session) result() *Result {
	res := &Result{
		Snapshot:       t.snapshot(),
		GatewayClasses: map[types.NamespacedName]*gwapiv1.GatewayClassStatus{},
		Gateways:       map[types.NamespacedName]*gwapiv1.GatewayStatus{},
		Policies:       map[PolicyKey]*gwapiv1.PolicyStatus{},
	}
	seal := irv1.Seal
	if t.sealer != nil {
		seal = t.sealer.seal
	}
	if err := seal(res.Snapshot); err != nil {
		// Only invalid UTF-8 in a string fails; names come from validated Kubernetes objects.
		t.problem("Snapshot", "", "", "", "Invalid", err.Error())
	}
	for name, gc := range t.classes {
		c := t.cond(string(gwapiv1.GatewayClassConditionStatusAccepted), true, string(gwapiv1.GatewayClassReasonAccepted),
			"GatewayClass is accepted by "+t.opts.ControllerName, gc.Generation)
		if why, bad := t.classRejected[name]; bad {
			c = t.cond(string(gwapiv1.GatewayClassConditionStatusAccepted), false, string(gwapiv1.GatewayClassReasonInvalidParameters), why, gc.Generation)
		}
		res.GatewayClasses[nn("", name)] = &gwapiv1.GatewayClassStatus{Conditions: []metav1.Condition{c}}
	}
	for _, g := range t.gateways {
		res.Gateways[g.key] = t.gatewayStatus(g)
	}
	res.ListenerSets = t.listenerSetStatuses()
	if t.handOver != nil {
		t.handOver.routeStatuses(t, res) // statuschanges.go
	} else {
		m := make(map[RouteKey]*gwapiv1.RouteStatus, len(t.routes))
		for _, st := range t.routes {
			m[st.key], _ = t.routeStatusOf(st)
		}
		res.Routes = routeStatusesOf(m)
	}
	t.backendPolicyStatuses(res)
	t.backendTLSStatuses(res)
	t.clientTrafficStatuses(res)
	t.gatewayFilterStatuses(res)
	res.Problems = sortProblems(t.problems)
	res.Warnings = sortProblems(t.warnings)
	res.ACME = t.acmeResult()
	res.UnresolvedFilters = map[string]int{}
	for kind, refs := range t.unresolvedFilters {
		res.UnresolvedFilters[kind] = len(refs)
	}
	return res
}

// withWarnings appends the route's warnings to a condition message.
func withWarnings(msg string, st *routeState) string {
	if len(st.warnings) == 0 {
		return msg
	}
	return msg + "; accepted with warnings: " + st.warningSummary()
}

func (t *session) cond(typ string, ok bool, reason, msg string, gen int64) metav1.Condition {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: gen, LastTransitionTime: t.now}
}

func (t *session) gatewayStatus(g *gatewayState) *gwapiv1.GatewayStatus {
	gen := g.gw.Generation
	st := &gwapiv1.GatewayStatus{}
	var notValid, unresolved []string
	accepted, programmed := 0, 0
	for _, l := range g.ownListeners() {
		st.Listeners = append(st.Listeners, t.listenerStatus(l))
		if !l.resolved.ok {
			unresolved = append(unresolved, string(l.spec.Name))
		}
		if l.accepted.ok {
			accepted++
		} else {
			notValid = append(notValid, string(l.spec.Name))
		}
		if l.programmed() {
			programmed++
		}
	}
	// The bind addresses are the addresses we know; in a cluster the controller adds the load
	// balancer's.
	for _, a := range g.addresses {
		if a != "" && g.rejectReason == "" && g.addrMsg == "" {
			typ := gwapiv1.IPAddressType
			st.Addresses = append(st.Addresses, gwapiv1.GatewayStatusAddress{Type: &typ, Value: a, Routability: t.statusRoutability(g, a)})
		}
	}
	if g.rejectReason == "" && g.addrMsg == "" {
		st.Addresses = append(st.Addresses, g.published...)
	}
	acc := condState{ok: true, reason: string(gwapiv1.GatewayReasonAccepted), msg: "Gateway is accepted"}
	switch {
	case g.rejectReason != "":
		acc = condState{reason: string(g.rejectReason), msg: g.rejectMsg}
	case accepted == 0:
		acc = condState{reason: string(gwapiv1.GatewayReasonListenersNotValid), msg: "no listener is valid: " + strings.Join(notValid, ", ")}
	case len(notValid) > 0:
		acc = condState{ok: true, reason: string(gwapiv1.GatewayReasonListenersNotValid), msg: "invalid listeners: " + strings.Join(notValid, ", ")}
	}
	if acc.ok && len(g.notes) > 0 {
		acc.msg += "; " + strings.Join(g.notes, "; ")
	}
	prog := condState{ok: true, reason: string(gwapiv1.GatewayReasonProgrammed), msg: "Gateway is translated into the snapshot"}
	switch {
	case g.rejectReason == gwapiv1.GatewayReasonUnsupportedAddress && t.opts.Provisioned[g.key] != nil:
		prog = condState{reason: string(gwapiv1.GatewayReasonInvalid), msg: g.rejectMsg}
	case g.rejectReason == gwapiv1.GatewayReasonUnsupportedAddress:
		prog = condState{reason: string(gwapiv1.GatewayReasonAddressNotUsable), msg: g.rejectMsg}
	case g.rejectReason == gwapiv1.GatewayReasonPending:
		prog = condState{reason: string(gwapiv1.GatewayReasonPending), msg: g.rejectMsg}
	case g.rejectReason == "" && g.addrMsg != "":
		prog = condState{reason: string(g.addrReason), msg: g.addrMsg}
	case g.rejectReason != "" || programmed == 0:
		prog = condState{reason: string(gwapiv1.GatewayReasonInvalid), msg: "no listener is programmed"}
	}
	// ResolvedRefs (experimental in v1.6) summarizes the listeners'; we have no Gateway-level
	// references of our own yet.
	res := condState{ok: true, reason: string(gwapiv1.GatewayReasonResolvedRefs), msg: "All references are resolved"}
	if len(unresolved) > 0 {
		res = condState{reason: string(gwapiv1.GatewayReasonListenersNotResolved), msg: "listeners with unresolved references: " + strings.Join(unresolved, ", ")}
	}
	if !g.backendTLS.ok {
		res = g.backendTLS // a Gateway-level reference: its reason says more than the summary
	}
	st.AttachedListenerSets = t.attachedListenerSets(g)
	st.Conditions = []metav1.Condition{
		t.cond(string(gwapiv1.GatewayConditionAccepted), acc.ok, acc.reason, acc.msg, gen),
		t.cond(string(gwapiv1.GatewayConditionProgrammed), prog.ok, prog.reason, prog.msg, gen),
		t.cond(string(gwapiv1.GatewayConditionResolvedRefs), res.ok, res.reason, res.msg, gen),
	}
	if t.opts.Routability {
		as := t.addressesAssigned(g)
		st.Conditions = append(st.Conditions, t.cond(string(gwapiv1.GatewayConditionAddressesAssigned), as.ok, as.reason, as.msg, gen))
	}
	if insecureFrontend(g.gw) {
		st.Conditions = append(st.Conditions, t.cond(string(gwapiv1.GatewayConditionInsecureFrontendValidationMode), true,
			string(gwapiv1.GatewayReasonConfigurationChanged),
			"spec.tls.frontend allows AllowInsecureFallback: clients without a valid certificate reach the routes", gen))
	}
	return st
}

func (t *session) listenerStatus(l *listenerState) gwapiv1.ListenerStatus {
	gen := l.gw.gw.Generation
	if l.owner != nil {
		gen = l.owner.ls.Generation
	}
	prog := condState{ok: true, reason: string(gwapiv1.ListenerReasonProgrammed), msg: "Listener is translated into the snapshot"}
	if !l.programmed() {
		prog = condState{reason: string(gwapiv1.ListenerReasonInvalid), msg: "Listener is not programmed: " + l.notProgrammedWhy()}
		if l.awaitingACME() || (l.acme != nil && l.acme.pending != "" && l.resolved.ok && l.accepted.ok) {
			prog = condState{reason: string(gwapiv1.ListenerReasonPending), msg: "Listener is not programmed: " + l.acme.pending}
		}
		if l.owner != nil && l.conflicted.ok {
			prog.reason = l.conflicted.reason // the spec's reason for a ListenerSet listener that lost
		}
	}
	st := gwapiv1.ListenerStatus{
		Name:           l.spec.Name,
		SupportedKinds: l.supportedKinds,
		AttachedRoutes: l.attached,
		Conditions: []metav1.Condition{
			t.cond(string(gwapiv1.ListenerConditionAccepted), l.accepted.ok, l.accepted.reason, l.accepted.msg, gen),
			t.cond(string(gwapiv1.ListenerConditionProgrammed), prog.ok, prog.reason, prog.msg, gen),
			t.cond(string(gwapiv1.ListenerConditionResolvedRefs), l.resolved.ok, l.resolved.reason, l.resolved.msg, gen),
			t.cond(string(gwapiv1.ListenerConditionConflicted), l.conflicted.ok, l.conflicted.reason, l.conflicted.msg, gen),
		},
	}
	if h := l.http3; h != nil {
		st.Conditions = append(st.Conditions, t.cond(ListenerConditionHTTP3, h.ok, h.reason, h.msg, gen))
	}
	return st
}

func (l *listenerState) notProgrammedWhy() string {
	switch {
	case l.gw.rejectReason != "":
		return "the Gateway is not accepted"
	case l.gw.addrMsg != "":
		return "the Gateway is not programmed (" + string(l.gw.addrReason) + "): " + l.gw.addrMsg
	case l.conflicted.ok:
		return l.conflicted.msg
	case !l.accepted.ok:
		return l.accepted.msg
	}
	return "no valid certificate: " + l.resolved.msg
}

// RouteConditionConflicted is set (True, reason RouteReasonShadowed) on a route of an
// ExclusiveKind that is attached and Accepted, but loses its listener or hostname to an older
// route of the same kind. Gateway API keeps such a route Accepted; this condition says why it
// gets no traffic.
const (
	RouteConditionConflicted = "Conflicted"
	RouteReasonShadowed      = "ShadowedByOlderRoute"
)

func (t *session) routeStatus(st *routeState) *gwapiv1.RouteStatus {
	gen := st.meta.GetGeneration()
	rs := &gwapiv1.RouteStatus{}
	for _, ps := range st.parents {
		res := condState{ok: true, reason: string(gwapiv1.RouteReasonResolvedRefs), msg: "All references are resolved"}
		if st.unresolved != nil {
			res = *st.unresolved
			if n := len(st.unresolvedFields) - 1; n > 0 {
				res.msg += fmt.Sprintf(" (and %d more unresolved references)", n)
			}
		}
		conds := []metav1.Condition{
			t.cond(string(gwapiv1.RouteConditionAccepted), ps.accepted.ok, ps.accepted.reason, ps.accepted.msg, gen),
			t.cond(string(gwapiv1.RouteConditionResolvedRefs), res.ok, res.reason, withWarnings(res.msg, st), gen),
		}
		if ps.accepted.ok && len(st.dropped) > 0 {
			conds = append(conds, t.cond(string(gwapiv1.RouteConditionPartiallyInvalid), true, string(st.dropFirst), st.droppedSummary(), gen))
		}
		if ps.accepted.ok && len(ps.kindConflicts) > 0 {
			conds = append(conds, t.cond(RouteConditionConflicted, true, translation.RouteReasonHostnameConflict,
				"not served on some listeners: "+conflictList(ps.kindConflicts), gen))
		}
		if ps.accepted.ok && len(ps.shadowed) > 0 {
			msgs := append([]string(nil), ps.shadowed...)
			sort.Strings(msgs)
			conds = append(conds, t.cond(RouteConditionConflicted, true, RouteReasonShadowed,
				"attached, but receives no traffic: "+strings.Join(msgs, "; "), gen))
		}
		rs.Parents = append(rs.Parents, gwapiv1.RouteParentStatus{
			ParentRef:      ps.ref,
			ControllerName: gwapiv1.GatewayController(t.opts.ControllerName),
			Conditions:     conds,
		})
	}
	return rs
}
