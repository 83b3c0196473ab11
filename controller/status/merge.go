package status

import (
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/conversion"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// semantic compares statuses the way the writer decides whether to write: like
// equality.Semantic (nil and empty slices are equal) but blind to a condition's
// lastTransitionTime, which every translation stamps afresh and which means nothing on its own.
var semantic = conversion.EqualitiesOrDie(func(a, b metav1.Condition) bool {
	a.LastTransitionTime = b.LastTransitionTime
	return a == b
})

// Equal reports whether two statuses say the same thing, ignoring lastTransitionTime.
func Equal(a, b any) bool {
	if ra, ok := a.(*gwapiv1.RouteStatus); ok {
		if rb, ok := b.(*gwapiv1.RouteStatus); ok {
			return routeStatusEqual(ra, rb)
		}
	}
	return semantic.DeepEqual(a, b)
}

// routeStatusEqual is semantic.DeepEqual for route statuses, without reflection: the writer
// compares every route's status at every translation, and at thousands of routes the reflective
// comparison cost more than the translation. TestRouteStatusEqualIsSemantic keeps the two alike
// (and fails when the Gateway API adds a field, which this must then compare too).
func routeStatusEqual(a, b *gwapiv1.RouteStatus) bool {
	if a == nil || b == nil || a == b {
		return a == b // the same status, which an incremental translation reuses
	}
	if len(a.Parents) != len(b.Parents) {
		return false
	}
	for i := range a.Parents {
		pa, pb := &a.Parents[i], &b.Parents[i]
		if pa.ControllerName != pb.ControllerName || !parentRefEqual(&pa.ParentRef, &pb.ParentRef) || len(pa.Conditions) != len(pb.Conditions) {
			return false
		}
		for j := range pa.Conditions {
			ca, cb := pa.Conditions[j], pb.Conditions[j]
			ca.LastTransitionTime = cb.LastTransitionTime
			if ca != cb {
				return false
			}
		}
	}
	return true
}

func parentRefEqual(a, b *gwapiv1.ParentReference) bool {
	return a.Name == b.Name && ptrEqual(a.Group, b.Group) && ptrEqual(a.Kind, b.Kind) && ptrEqual(a.Namespace, b.Namespace) &&
		ptrEqual(a.SectionName, b.SectionName) && ptrEqual(a.Port, b.Port)
}

func ptrEqual[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// mergeConditions returns desired with lastTransitionTime carried over from live for every
// condition whose status did not change: the time a condition last transitioned survives a new
// reason, message or observedGeneration, as the Kubernetes API conventions require. Live
// conditions of another domain's type that desired does not name follow, untouched: another
// controller owns them (GatewayPreserveForeignConditions).
func mergeConditions(live, desired []metav1.Condition) []metav1.Condition {
	if desired == nil {
		return nil
	}
	out := make([]metav1.Condition, len(desired), len(desired)+len(live))
	for i, c := range desired {
		if prev := meta.FindStatusCondition(live, c.Type); prev != nil && prev.Status == c.Status {
			c.LastTransitionTime = prev.LastTransitionTime
		}
		out[i] = c
	}
	for _, c := range live {
		if foreign(c.Type) && meta.FindStatusCondition(desired, c.Type) == nil {
			out = append(out, c)
		}
	}
	return out
}

// ownDomain prefixes the condition types of Coxswain's own (ConditionModulesAvailable).
const ownDomain = "coxswain-labs.dev/"

// foreign reports whether a condition type belongs to somebody else: a domain-prefixed type of
// another domain. Unprefixed types are the Gateway API's, which the controller of the object owns.
func foreign(condType string) bool {
	return strings.Contains(condType, "/") && !strings.HasPrefix(condType, ownDomain)
}

// classStatus is the GatewayClass status to write: the translator's conditions and the features
// the desired status claims (see controller/features).
func classStatus(live gwapiv1.GatewayClassStatus, desired *gwapiv1.GatewayClassStatus) gwapiv1.GatewayClassStatus {
	return gwapiv1.GatewayClassStatus{
		Conditions:        mergeConditions(live.Conditions, desired.Conditions),
		SupportedFeatures: desired.SupportedFeatures,
	}
}

// gate says whether a Gateway's current generation may be stamped Programmed.
type gate struct {
	// Generation is the Gateway's metadata.generation.
	Generation int64
	// Applied is the newest generation the data plane has bound and acknowledged; 0 for none.
	Applied int64
	// Awaiting is what the data plane said this generation waits for, when it said so.
	Awaiting string
	// Unbound are the Gateway's listeners some proxy cannot bind now.
	Unbound []ListenerFailure
	// Addresses are the addresses this controller publishes for a Gateway that asks for none.
	Addresses []gwapiv1.GatewayStatusAddress
	// Now stamps conditions the writer makes up itself.
	Now metav1.Time
}

// gatewayStatus is the Gateway status to write: the translator's, with the published addresses
// (those the Gateway asked for in spec.addresses, else the controller's --status-address),
// lastTransitionTimes carried over from live, and Programmed held back (on the Gateway and on each
// listener) until the data plane has applied this generation and live already shows the addresses.
// Held back means a live Programmed=True stays as it is, stamped for an older generation (so
// Programmed never flips back while a new generation rolls out, and its observedGeneration
// trails); otherwise Programmed is False with reason Pending and a message naming what is awaited.
// What proxies cannot bind overrides both (applyUnbound): a bind failure is the data plane's
// present state, not churn.
func gatewayStatus(live gwapiv1.GatewayStatus, desired *gwapiv1.GatewayStatus, g gate) gwapiv1.GatewayStatus {
	addrs := desired.Addresses // the Gateway's own spec.addresses, when it asked for some
	if len(addrs) == 0 {
		addrs = fallbackAddresses(g.Addresses, desired.Conditions)
	}
	out := gwapiv1.GatewayStatus{
		Addresses:            addrs,
		Conditions:           mergeConditions(live.Conditions, desired.Conditions),
		AttachedListenerSets: desired.AttachedListenerSets,
	}
	hold := g.Applied < g.Generation || !Equal(live.Addresses, addrs)
	switch {
	case len(addrs) == 0 && programmedTrue(desired.Conditions):
		// Only a Gateway the translator programmed lacks an address; one it did not (not
		// accepted, an unusable spec address) keeps the reason that says why.
		setFalse(out.Conditions, string(gwapiv1.GatewayConditionProgrammed), string(gwapiv1.GatewayReasonAddressNotAssigned),
			"No address to publish: start the controller with --status-address", g)
		setFalse(out.Conditions, string(gwapiv1.GatewayConditionAddressesAssigned), string(gwapiv1.GatewayReasonAddressesNotAssigned),
			"No address to publish: start the controller with --status-address", g)
		out.Conditions = mergeConditions(live.Conditions, out.Conditions)
	case hold:
		holdProgrammed(out.Conditions, live.Conditions, string(gwapiv1.GatewayReasonPending), g)
	}
	for _, l := range desired.Listeners {
		var liveConds []metav1.Condition
		for _, ll := range live.Listeners {
			if ll.Name == l.Name {
				liveConds = ll.Conditions
			}
		}
		l.Conditions = mergeConditions(liveConds, l.Conditions)
		if hold || len(addrs) == 0 {
			holdProgrammed(l.Conditions, liveConds, string(gwapiv1.ListenerReasonPending), g)
		}
		out.Listeners = append(out.Listeners, l)
	}
	applyUnbound(&out, live, desired, g, len(addrs) > 0)
	return out
}

// holdProgrammed replaces a Programmed=True condition in conds (in place) by the one live has, or
// by False/Pending when live has none.
func holdProgrammed(conds, live []metav1.Condition, pending string, g gate) {
	for i := range conds {
		c := &conds[i]
		if c.Type != string(gwapiv1.GatewayConditionProgrammed) || c.Status != metav1.ConditionTrue {
			continue
		}
		if prev := meta.FindStatusCondition(live, c.Type); prev != nil && prev.Status == metav1.ConditionTrue {
			*c = *prev // programmed for an older generation: say nothing about this one yet
			return
		}
		*c = metav1.Condition{
			Type: c.Type, Status: metav1.ConditionFalse, Reason: pending, Message: g.awaitingMessage(),
			ObservedGeneration: g.Generation, LastTransitionTime: g.Now,
		}
	}
}

// awaitingMessage says what a held Programmed condition waits for.
func (g gate) awaitingMessage() string {
	switch {
	case g.Applied >= g.Generation:
		return "Waiting for the address to be published in status"
	case g.Awaiting != "":
		return "Waiting for " + g.Awaiting
	default:
		return "Waiting for the data plane to bind the listeners and acknowledge this generation"
	}
}

// setFalse turns condition typ of conds (in place) False with reason.
func setFalse(conds []metav1.Condition, typ, reason, msg string, g gate) {
	for i := range conds {
		if conds[i].Type == typ {
			conds[i] = metav1.Condition{Type: typ, Status: metav1.ConditionFalse, Reason: reason, Message: msg,
				ObservedGeneration: g.Generation, LastTransitionTime: g.Now}
		}
	}
}

// routeParents merges this controller's parent statuses into live: entries other controllers
// wrote are kept as they are and in their order, ours are replaced by desired (which holds only
// ours), and ours that desired no longer lists are dropped.
func routeParents(live, desired []gwapiv1.RouteParentStatus, controller gwapiv1.GatewayController) []gwapiv1.RouteParentStatus {
	return mergeOwned(live, desired, controller, routeParentFields)
}

var routeParentFields = ownedFields[gwapiv1.RouteParentStatus]{
	controller: func(p *gwapiv1.RouteParentStatus) *gwapiv1.GatewayController { return &p.ControllerName },
	ref:        func(p *gwapiv1.RouteParentStatus) any { return p.ParentRef },
	conditions: func(p *gwapiv1.RouteParentStatus) *[]metav1.Condition { return &p.Conditions },
}

// ownedFields reaches the parts of a status entry that several controllers share a list of (a
// route's parents, a policy's ancestors): who wrote it, what it is about, its conditions.
type ownedFields[E any] struct {
	controller func(*E) *gwapiv1.GatewayController
	ref        func(*E) any
	conditions func(*E) *[]metav1.Condition
}

// mergeOwned merges this controller's entries, desired, into live: other controllers' entries are
// kept as they are and in their order, ours are replaced by desired (lastTransitionTime carried
// over per condition from our live entry about the same ref), ours that desired no longer lists
// are dropped. The result is never nil: such lists are required fields.
func mergeOwned[E any](live, desired []E, controller gwapiv1.GatewayController, f ownedFields[E]) []E {
	out := []E{}
	for i := range live {
		if *f.controller(&live[i]) != controller {
			out = append(out, live[i])
		}
	}
	for _, d := range desired {
		*f.controller(&d) = controller
		var liveConds []metav1.Condition
		for i := range live {
			if *f.controller(&live[i]) == controller && reflect.DeepEqual(f.ref(&live[i]), f.ref(&d)) {
				liveConds = *f.conditions(&live[i])
			}
		}
		*f.conditions(&d) = mergeConditions(liveConds, *f.conditions(&d))
		out = append(out, d)
	}
	return out
}

// hasParentsOf reports whether controller wrote any entry of parents.
func hasParentsOf(parents []gwapiv1.RouteParentStatus, controller gwapiv1.GatewayController) bool {
	return hasOwned(parents, controller, routeParentFields)
}

// hasOwned reports whether controller wrote any of entries.
func hasOwned[E any](entries []E, controller gwapiv1.GatewayController, f ownedFields[E]) bool {
	for i := range entries {
		if *f.controller(&entries[i]) == controller {
			return true
		}
	}
	return false
}
