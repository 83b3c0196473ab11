package translator

import (
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// A ListenerSet (gateway.networking.k8s.io/v1, GEP-1713) adds listeners to a Gateway from its own
// namespace or another one the Gateway's spec.allowedListeners admits. Its listeners become
// entries of the Gateway's listener list with the ListenerSet as owner, so that validation, TLS,
// attachment, cross-Gateway socket sharing and the snapshot treat them as the Gateway's own.
// What differs is said here:
//
//   - precedence: the Gateway's own listeners come first, then the ListenerSets oldest first
//     (creationTimestamp, then namespace/name), each in list order. A ListenerSet listener that
//     conflicts with one before it is Conflicted and not accepted; the earlier one keeps its
//     port (the Gateway's own listeners conflicting among themselves lose together, as before).
//   - routes reach a ListenerSet listener only through a parentRef to the ListenerSet; a
//     parentRef to the Gateway selects the Gateway's own listeners only.
//   - "Same" namespace (allowedRoutes) and certificateRefs are relative to the ListenerSet, and a
//     cross-namespace certificate needs a ReferenceGrant from kind ListenerSet.

const listenerSetKind = "ListenerSet"

// ListenerSetSourceKind marks the snapshot entries (Snapshot.gateways, Server.sources) that stand
// for a ListenerSet rather than a Gateway: such a GatewayGeneration is named
// ListenerSetSourceKind + ":" + <name> in the ListenerSet's namespace, so the data plane's
// bind-and-acknowledge gate runs for each ListenerSet generation as it does for a Gateway's (no
// Kubernetes object name holds a ':').
const ListenerSetSourceKind = listenerSetKind

// ListenerSetGatewayName is the snapshot name of ListenerSet name (see ListenerSetSourceKind).
func ListenerSetGatewayName(name string) string { return ListenerSetSourceKind + ":" + name }

// listenerSetState is one ListenerSet whose parent is one of our Gateways.
type listenerSetState struct {
	ls  *gwapiv1.ListenerSet
	key types.NamespacedName
	gw  *gatewayState
	// accepted is false when the Gateway does not admit the ListenerSet (NotAllowed), is not
	// accepted itself (ParentNotAccepted) or none of the ListenerSet's listeners is valid.
	accepted condState
	// allowed says the Gateway admits it: its listeners are translated and count.
	allowed   bool
	listeners []*listenerState
	specs     []gwapiv1.Listener
}

// sectionPrefix is what the snapshot names of the owner's listeners start with after the Gateway:
// "" for the Gateway's own, else "ListenerSet:<namespace>/<name>/" (listener names are unique only
// within their owner).
func (ls *listenerSetState) sectionPrefix() string {
	if ls == nil {
		return ""
	}
	return ListenerSetGatewayName(ls.key.Namespace) + "/" + ls.key.Name + "/"
}

// namespace is the namespace allowedRoutes "Same" means for l.
func (l *listenerState) namespace() string {
	if l.owner != nil {
		return l.owner.key.Namespace
	}
	return l.gw.key.Namespace
}

// sources are the Server.sources that name l: "<gw namespace>/<gw>/<section>" for the Gateway
// (its dedicated proxies and its gate), and for a ListenerSet listener also
// "<ls namespace>/ListenerSet:<ls>/<section>" for the ListenerSet's own gate.
func (l *listenerState) sources() []string {
	if l.owner == nil {
		return []string{l.name}
	}
	return []string{l.name, l.owner.key.Namespace + "/" + ListenerSetGatewayName(l.owner.key.Name) + "/" + string(l.spec.Name)}
}

// ownListeners are the listeners of the Gateway's spec, which a parentRef to the Gateway selects.
func (g *gatewayState) ownListeners() []*listenerState {
	var out []*listenerState
	for _, l := range g.listeners {
		if l.owner == nil {
			out = append(out, l)
		}
	}
	return out
}

// indexListenerSets groups the store's ListenerSets by the Gateway their parentRef names, oldest
// first (their precedence order).
func (t *session) indexListenerSets() map[types.NamespacedName][]*gwapiv1.ListenerSet {
	out := map[types.NamespacedName][]*gwapiv1.ListenerSet{}
	for _, ls := range t.store.ListenerSets {
		ref := ls.Spec.ParentRef
		if ref.Group != nil && *ref.Group != gwapiv1.GroupName || ref.Kind != nil && *ref.Kind != "Gateway" {
			continue // a parent of a kind no Gateway API implementation knows: not ours
		}
		ns := ls.Namespace
		if ref.Namespace != nil && *ref.Namespace != "" {
			ns = string(*ref.Namespace)
		}
		k := nn(ns, string(ref.Name))
		out[k] = append(out[k], ls)
	}
	for _, list := range out {
		sort.Slice(list, func(i, j int) bool { return olderFirst(list[i], list[j]) })
	}
	return out
}

// translateListenerSets appends the listeners of the ListenerSets the Gateway admits to its
// listener list, in precedence order, each checked against those before it.
func (t *session) translateListenerSets(g *gatewayState) {
	if t.listenerSetsByGateway == nil {
		t.listenerSetsByGateway = t.indexListenerSets()
	}
	for _, ls := range t.listenerSetsByGateway[g.key] {
		s := &listenerSetState{ls: ls, key: nn(ls.Namespace, ls.Name), gw: g}
		t.listenerSets = append(t.listenerSets, s)
		t.lsByKey[s.key] = s
		if why := t.listenerSetAllowed(g, ls.Namespace); why != "" {
			s.accepted = condState{reason: string(gwapiv1.ListenerSetReasonNotAllowed), msg: why}
			t.problem(listenerSetKind, s.key.Namespace, s.key.Name, "spec.parentRef", string(gwapiv1.ListenerSetReasonNotAllowed), why)
			continue
		}
		s.allowed = true
		s.specs = make([]gwapiv1.Listener, len(ls.Spec.Listeners))
		for i, e := range ls.Spec.Listeners {
			s.specs[i] = gwapiv1.Listener(e) // the same fields: a ListenerSet listener is a Gateway listener
			l := t.translateListener(g, s, &s.specs[i], i)
			if l.accepted.ok {
				t.precedenceConflict(l, g.listeners)
			}
			s.listeners = append(s.listeners, l)
			g.listeners = append(g.listeners, l)
		}
		s.accepted = s.acceptance()
	}
}

// listenerSetAllowed says why Gateway g does not admit ListenerSets of namespace ns; "" when it
// does. Without spec.allowedListeners a Gateway admits none.
func (t *session) listenerSetAllowed(g *gatewayState, ns string) string {
	from := gwapiv1.NamespacesFromNone
	var sel *metav1.LabelSelector
	if al := g.gw.Spec.AllowedListeners; al != nil && al.Namespaces != nil {
		if al.Namespaces.From != nil {
			from = *al.Namespaces.From
		}
		sel = al.Namespaces.Selector
	}
	switch from {
	case gwapiv1.NamespacesFromAll:
		return ""
	case gwapiv1.NamespacesFromSame:
		if ns == g.key.Namespace {
			return ""
		}
		return fmt.Sprintf("Gateway %s admits ListenerSets of its own namespace only (spec.allowedListeners.namespaces.from: Same)", g.key)
	case gwapiv1.NamespacesFromSelector:
		if sel == nil {
			return fmt.Sprintf("Gateway %s selects ListenerSet namespaces with no selector", g.key)
		}
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			return fmt.Sprintf("Gateway %s: spec.allowedListeners.namespaces.selector: %v", g.key, err)
		}
		if s.Matches(labels.Set(t.namespaceLabels(ns))) {
			return ""
		}
		return fmt.Sprintf("namespace %s is not selected by spec.allowedListeners.namespaces.selector of Gateway %s", ns, g.key)
	}
	return fmt.Sprintf("Gateway %s admits no ListenerSets (spec.allowedListeners.namespaces.from: None, the default)", g.key)
}

// precedenceConflict marks ListenerSet listener l Conflicted when it is not distinct from an
// accepted listener before it in before (the Gateway's, and earlier ListenerSets').
func (t *session) precedenceConflict(l *listenerState, before []*listenerState) {
	for _, o := range before {
		if !o.accepted.ok || o.spec.Port != l.spec.Port || transport(o.spec.Protocol) != transport(l.spec.Protocol) {
			continue
		}
		owner := "the Gateway"
		if o.owner != nil {
			owner = "ListenerSet " + o.owner.key.String()
		}
		switch {
		case protocolFamily(o.spec.Protocol) != protocolFamily(l.spec.Protocol) || !distinguishesByHostname(l.spec.Protocol):
			t.conflict(l, gwapiv1.ListenerReasonProtocolConflict,
				fmt.Sprintf("port %d is used with protocol %s by listener %q of %s", l.spec.Port, o.spec.Protocol, o.spec.Name, owner))
			return
		case o.hostname == l.hostname:
			t.conflict(l, gwapiv1.ListenerReasonHostnameConflict,
				fmt.Sprintf("port %d and hostname %q are used by listener %q of %s", l.spec.Port, l.hostname, o.spec.Name, owner))
			return
		}
	}
}

// acceptance is the ListenerSet's Accepted condition once its listeners are translated.
func (s *listenerSetState) acceptance() condState {
	if g := s.gw; g.rejectReason != "" {
		return condState{reason: string(gwapiv1.ListenerSetReasonParentNotAccepted), msg: fmt.Sprintf("Gateway %s is not accepted: %s", g.key, g.rejectMsg)}
	}
	// A listener with unresolved references (a certificate it may not use, route kinds it
	// cannot take) counts as invalid here: a ListenerSet of nothing but such listeners attaches
	// nothing, and the spec reports it ListenersNotValid.
	var invalid []string
	for _, l := range s.listeners {
		if !l.accepted.ok || !l.resolved.ok {
			invalid = append(invalid, string(l.spec.Name))
		}
	}
	switch {
	case len(s.listeners) == 0 || len(invalid) == len(s.listeners):
		return condState{reason: string(gwapiv1.ListenerSetReasonListenersNotValid), msg: "no listener is valid: " + joinNames(invalid)}
	case len(invalid) > 0:
		return condState{ok: true, reason: string(gwapiv1.ListenerSetReasonListenersNotValid), msg: "invalid listeners: " + joinNames(invalid)}
	}
	return condState{ok: true, reason: string(gwapiv1.ListenerSetReasonAccepted), msg: "ListenerSet is accepted"}
}

func joinNames(names []string) string {
	if len(names) == 0 {
		return "none listed"
	}
	out := names[0]
	for _, n := range names[1:] {
		out += ", " + n
	}
	return out
}
