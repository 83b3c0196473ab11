package translator

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// gatewayState is one of our Gateways while it is translated.
type gatewayState struct {
	gw  *gwapiv1.Gateway
	key types.NamespacedName
	// addresses are the bind addresses: the spec's IPAddress values, or [""] (every address).
	addresses []string
	// Gateway-level rejection (addresses, parameters); empty when the Gateway itself is fine.
	rejectReason gwapiv1.GatewayConditionReason
	rejectMsg    string
	listeners    []*listenerState
}

// condState is one condition being decided: ok is its status, reason and msg explain it.
type condState struct {
	ok     bool
	reason string
	msg    string
}

// listenerState is one Gateway listener while it is translated.
type listenerState struct {
	gw       *gatewayState
	index    int
	spec     *gwapiv1.Listener
	name     string // "<namespace>/<gateway>/<section>"
	hostname string

	supportedKinds []gwapiv1.RouteGroupKind
	accepted       condState
	resolved       condState
	conflicted     condState // ok means "conflicted"

	// certs are the IR Secret names of the valid certificateRefs, in order; passthrough is a TLS
	// listener that forwards the encrypted stream.
	certs       []string
	passthrough bool
	// attached counts the accepted routes attached; routes are what to place in the snapshot.
	attached int32
	routes   []*attachment
	placed   map[*routeState]bool
	// selector caches allowedRoutes.namespaces.selector; selectorErr when it does not parse.
	selector    labels.Selector
	selectorErr bool
}

// programmed reports whether the listener goes into the snapshot.
func (l *listenerState) programmed() bool {
	if l.gw.rejectReason != "" || !l.accepted.ok || l.conflicted.ok {
		return false
	}
	switch l.spec.Protocol {
	case gwapiv1.HTTPSProtocolType, gwapiv1.TLSProtocolType:
		return l.passthrough || len(l.certs) > 0
	}
	return true
}

func (l *listenerState) field(sub string) string {
	f := fmt.Sprintf("spec.listeners[%d]", l.index)
	if sub != "" {
		f += "." + sub
	}
	return f
}

func (t *translation) gatewayProblem(g *gatewayState, field, reason, msg string) {
	t.problem("Gateway", g.key.Namespace, g.key.Name, field, reason, msg)
}

func (t *translation) translateGateways() {
	var gws []*gwapiv1.Gateway
	for _, gw := range t.store.Gateways {
		if _, ok := t.classes[string(gw.Spec.GatewayClassName)]; ok {
			gws = append(gws, gw)
		}
	}
	sort.Slice(gws, func(i, j int) bool { return olderFirst(gws[i], gws[j]) })
	for _, gw := range gws {
		g := &gatewayState{gw: gw, key: nn(gw.Namespace, gw.Name)}
		t.gateways = append(t.gateways, g)
		t.gwByKey[g.key] = g
		if why, bad := t.classRejected[string(gw.Spec.GatewayClassName)]; bad {
			g.reject(gwapiv1.GatewayReasonPending, fmt.Sprintf("GatewayClass %s is not accepted: %s", gw.Spec.GatewayClassName, why))
		}
		t.gatewayAddresses(g)
		if ref := infraParams(gw); ref != "" {
			msg := "infrastructure.parametersRef " + ref + ": no parameters kind is supported"
			g.reject(gwapiv1.GatewayReasonInvalidParameters, msg)
			t.gatewayProblem(g, "spec.infrastructure.parametersRef", string(gwapiv1.GatewayReasonInvalidParameters), msg)
		}
		for i := range gw.Spec.Listeners {
			g.listeners = append(g.listeners, t.translateListener(g, i))
		}
		t.gatewayConflicts(g)
	}
	t.crossGatewayConflicts()
}

// reject marks the whole Gateway not accepted; the first reason found is the one reported.
func (g *gatewayState) reject(reason gwapiv1.GatewayConditionReason, msg string) {
	if g.rejectReason == "" {
		g.rejectReason, g.rejectMsg = reason, msg
	}
}

func infraParams(gw *gwapiv1.Gateway) string {
	if gw.Spec.Infrastructure == nil || gw.Spec.Infrastructure.ParametersRef == nil {
		return ""
	}
	r := gw.Spec.Infrastructure.ParametersRef
	return string(r.Kind) + " " + r.Name
}

// gatewayAddresses validates spec.addresses: only IP addresses are supported, each becomes a
// bind address. An empty IPAddress value asks for any address. A Gateway that names no address
// (no spec.addresses, or only empty values) binds the address the controller gave it, if any,
// else every address.
func (t *translation) gatewayAddresses(g *gatewayState) {
	seen := map[string]bool{}
	for i, a := range g.gw.Spec.Addresses {
		typ := gwapiv1.IPAddressType
		if a.Type != nil {
			typ = *a.Type
		}
		field := fmt.Sprintf("spec.addresses[%d]", i)
		if typ != gwapiv1.IPAddressType {
			msg := fmt.Sprintf("address type %q is not supported; only IPAddress", typ)
			g.reject(gwapiv1.GatewayReasonUnsupportedAddress, msg)
			t.gatewayProblem(g, field+".type", string(gwapiv1.GatewayReasonUnsupportedAddress), msg)
			continue
		}
		addr := ""
		if a.Value != "" {
			ip, err := netip.ParseAddr(a.Value)
			if err != nil || ip.Zone() != "" {
				msg := fmt.Sprintf("%q is not an IP address", a.Value)
				g.reject(gwapiv1.GatewayReasonUnsupportedAddress, msg)
				t.gatewayProblem(g, field+".value", string(gwapiv1.GatewayReasonUnsupportedAddress), msg)
				continue
			}
			addr = ip.Unmap().String()
		}
		if !seen[addr] {
			seen[addr] = true
			g.addresses = append(g.addresses, addr)
		}
	}
	if a, ok := t.opts.GatewayAddresses[g.key]; ok && (len(g.addresses) == 0 || (len(g.addresses) == 1 && seen[""])) {
		g.addresses = []string{a.Unmap().String()}
		return
	}
	if seen[""] || len(g.addresses) == 0 {
		g.addresses = []string{""}
	}
	sort.Strings(g.addresses)
}

func (t *translation) translateListener(g *gatewayState, i int) *listenerState {
	spec := &g.gw.Spec.Listeners[i]
	l := &listenerState{
		gw: g, index: i, spec: spec,
		name:       g.key.Namespace + "/" + g.key.Name + "/" + string(spec.Name),
		accepted:   condState{ok: true, reason: string(gwapiv1.ListenerReasonAccepted), msg: "Listener is accepted"},
		resolved:   condState{ok: true, reason: string(gwapiv1.ListenerReasonResolvedRefs), msg: "All references are resolved"},
		conflicted: condState{reason: string(gwapiv1.ListenerReasonNoConflicts), msg: "No conflicts"},
	}
	if spec.Hostname != nil && distinguishesByHostname(spec.Protocol) {
		// TCP and UDP listeners ignore their hostname: nothing on the wire carries one.
		l.hostname = string(*spec.Hostname)
	}
	l.supportedKinds = []gwapiv1.RouteGroupKind{}
	if !t.protocolSupported(spec.Protocol) {
		t.rejectListener(l, "protocol", gwapiv1.ListenerReasonUnsupportedProtocol,
			fmt.Sprintf("protocol %q is not supported", spec.Protocol))
		return l
	}
	if err := validListenerHostname(l.hostname); err != "" {
		t.rejectListener(l, "hostname", gwapiv1.ListenerReasonUnsupportedValue, err)
	}
	t.listenerKinds(l)
	t.listenerTLS(l)
	if tls := g.gw.Spec.TLS; tls != nil && tls.Frontend != nil && spec.Protocol == gwapiv1.HTTPSProtocolType {
		// Serving without the client-certificate check the Gateway asks for would be silently
		// less secure than configured.
		t.rejectListener(l, "tls", gwapiv1.ListenerReasonUnsupportedValue,
			"client certificate validation (Gateway spec.tls.frontend) is not supported yet")
	}
	return l
}

func (t *translation) rejectListener(l *listenerState, field string, reason gwapiv1.ListenerConditionReason, msg string) {
	if l.accepted.ok {
		l.accepted = condState{reason: string(reason), msg: msg}
	}
	t.gatewayProblem(l.gw, l.field(field), string(reason), msg)
}

func (t *translation) unresolvedListener(l *listenerState, field string, reason gwapiv1.ListenerConditionReason, msg string) {
	if l.resolved.ok {
		l.resolved = condState{reason: string(reason), msg: msg}
	}
	t.gatewayProblem(l.gw, l.field(field), string(reason), msg)
}

func (t *translation) protocolSupported(p gwapiv1.ProtocolType) bool {
	return len(t.kindsFor(p)) > 0
}

// kindsFor lists the route kinds that attach to listeners of protocol p.
func (t *translation) kindsFor(p gwapiv1.ProtocolType) []RouteKind {
	var out []RouteKind
	for _, k := range t.kinds {
		for _, kp := range k.Protocols() {
			if kp == p {
				out = append(out, k)
				break
			}
		}
	}
	return out
}

// listenerKinds computes supportedKinds: the allowedRoutes.kinds this build can attach to the
// listener's protocol, or every such kind when the listener names none.
func (t *translation) listenerKinds(l *listenerState) {
	avail := t.kindsFor(l.spec.Protocol)
	if l.spec.AllowedRoutes == nil || len(l.spec.AllowedRoutes.Kinds) == 0 {
		for _, k := range avail {
			l.supportedKinds = append(l.supportedKinds, normalGroupKind(k.GroupKind()))
		}
		return
	}
	var bad []string
	for _, want := range l.spec.AllowedRoutes.Kinds {
		want = normalGroupKind(want)
		found := false
		for _, k := range avail {
			if sameGroupKind(k.GroupKind(), want) {
				found = true
			}
		}
		switch {
		case !found:
			bad = append(bad, groupKindString(want))
		case !containsGroupKind(l.supportedKinds, want):
			l.supportedKinds = append(l.supportedKinds, want)
		}
	}
	if len(bad) > 0 {
		t.unresolvedListener(l, "allowedRoutes.kinds", gwapiv1.ListenerReasonInvalidRouteKinds,
			fmt.Sprintf("route kinds %s are not supported on %s listeners", strings.Join(bad, ", "), l.spec.Protocol))
	}
}

// validListenerHostname checks what CEL would have: a DNS name, optionally with a leading "*."
// label, and never an IP address.
func validListenerHostname(h string) string {
	if h == "" {
		return ""
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return fmt.Sprintf("hostname %q is an IP address", h)
	}
	name := strings.TrimPrefix(h, "*.")
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Sprintf("hostname %q is invalid: %s", h, strings.Join(errs, "; "))
	}
	return ""
}

func normalGroupKind(gk gwapiv1.RouteGroupKind) gwapiv1.RouteGroupKind {
	g := gwapiv1.Group(gwapiv1.GroupName)
	if gk.Group != nil {
		g = *gk.Group
	}
	return gwapiv1.RouteGroupKind{Group: &g, Kind: gk.Kind}
}

func sameGroupKind(a, b gwapiv1.RouteGroupKind) bool {
	a, b = normalGroupKind(a), normalGroupKind(b)
	return *a.Group == *b.Group && a.Kind == b.Kind
}

func containsGroupKind(list []gwapiv1.RouteGroupKind, gk gwapiv1.RouteGroupKind) bool {
	for _, x := range list {
		if sameGroupKind(x, gk) {
			return true
		}
	}
	return false
}

func groupKindString(gk gwapiv1.RouteGroupKind) string {
	gk = normalGroupKind(gk)
	if *gk.Group == "" {
		return string(gk.Kind)
	}
	return string(gk.Kind) + "." + string(*gk.Group)
}
