package translator

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller/provision/dedicated"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/translation"
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
	// addrReason and addrMsg say why the Gateway has no address to bind (AddressNotUsable: a spec
	// address can never be bound; AddressNotAssigned: the pool has none left). It stays accepted,
	// but none of it is programmed.
	addrReason gwapiv1.GatewayConditionReason
	addrMsg    string
	// routability is the spec routability each bind address satisfies (routability.go);
	// unsatisfied names the spec.addresses entries no address satisfies (AddressesAssigned);
	// published are the --status-address addresses a Gateway bound on every address reports.
	routability map[string]gwapiv1.GatewayAddressRoutabilityType
	unsatisfied []string
	published   []gwapiv1.GatewayStatusAddress
	// notes are appended to the Accepted message: accepted, but not all as written.
	notes     []string
	listeners []*listenerState
	// clientCert is the Secret (IR name) presented to TLS backends, "" for none; backendTLS is
	// why spec.tls.backend does not resolve (ok when it does, or is not set).
	clientCert string
	backendTLS condState
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
	// acme is set on an HTTPS listener whose certificate comes from ACME (acme.go).
	acme *acmeListener
	// clientValidation is the client certificate check of an HTTPS listener (spec.tls.frontend),
	// nil for none.
	clientValidation *irv1.ClientValidation
	// attached counts the accepted routes attached; routes are what to place in the snapshot.
	attached int32
	routes   []*attachment
	// kept is the listener's kept list when routes is it (keep.go).
	kept *keptListener
	// crossRoute says a pass over several routes took an attachment off the listener or changed
	// its hostnames (kind conflicts, implicit routes yielding): its virtual hosts are not only
	// the sum of its routes' own records (vhosts.go).
	crossRoute bool
	// pkey names the listener across translations (placeKey), computed on first use.
	pkey    placeKey
	pkeySet bool
	pid     placeID
	pidSet  bool
	// selector caches allowedRoutes.namespaces.selector; selectorErr when it does not parse.
	selector    labels.Selector
	selectorErr bool
	// clientPolicy is the ClientTrafficPolicy target that applies to the listener; appliedOn the
	// sockets that took it.
	clientPolicy *ctpTarget
	appliedOn    map[string]bool
	// http3 is the HTTP3 condition of an HTTPS listener whose policy asks for HTTP/3 (http3.go);
	// nil when none does.
	http3 *condState
	// owner is the ListenerSet the listener comes from; nil for the Gateway's own listeners.
	owner *listenerSetState
	// filters are the listener filters (listenerfilters.go); filtersFailed says one cannot be
	// served, and then neither is the listener.
	filters       []*irv1.ModuleConfig
	filtersFailed bool
}

// programmed reports whether the listener goes into the snapshot.
func (l *listenerState) programmed() bool {
	if l.gw.rejectReason != "" || l.gw.addrMsg != "" || !l.accepted.ok || l.conflicted.ok || l.filtersFailed {
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

func (t *session) gatewayProblem(g *gatewayState, field, reason, msg string) {
	t.problem("Gateway", g.key.Namespace, g.key.Name, field, reason, msg)
}

func (t *session) translateGateways() {
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
		if p, ok := t.opts.Provisioned[g.key]; ok {
			t.provisionedAddresses(g, p)
		} else {
			t.gatewayAddresses(g)
		}
		// The class's own reference is checked with the class (translateClasses).
		if _, err := dedicated.ResolveGateway(gw, nil, t.gatewayParameters); err != nil {
			g.reject(gwapiv1.GatewayReasonInvalidParameters, err.Error())
			field, msg := paramsProblem(err)
			t.gatewayProblem(g, field, string(gwapiv1.GatewayReasonInvalidParameters), msg)
		}
		g.backendTLS.ok = true
		t.gatewayBackendTLS(g)
		for i := range gw.Spec.Listeners {
			g.listeners = append(g.listeners, t.translateListener(g, nil, &gw.Spec.Listeners[i], i))
		}
		t.gatewayConflicts(g)
		t.translateListenerSets(g)
	}
	t.crossGatewayConflicts()
}

// reject marks the whole Gateway not accepted; the first reason found is the one reported.
func (g *gatewayState) reject(reason gwapiv1.GatewayConditionReason, msg string) {
	if g.rejectReason == "" {
		g.rejectReason, g.rejectMsg = reason, msg
	}
}

// gatewayAddresses turns spec.addresses into bind addresses:
//
//   - an entry of any type but IPAddress (unset means IPAddress) is not supported: the Gateway is
//     not accepted (UnsupportedAddress);
//   - an IPAddress value is bound as given (an IPv4-mapped IPv6 address as IPv4); one that is not
//     a unicast IP address can never be bound, so the Gateway stays accepted but nothing of it is
//     programmed (AddressNotUsable) until the spec is fixed;
//   - no entry, or an IPAddress entry without a value, asks for an address: the one the
//     controller gave the Gateway from its pool, when it gave one; else nothing more when the
//     spec names addresses of its own (a port cannot be bound on every address and on one);
//     else, with a pool, none (AddressNotAssigned: it is not programmed); else every address;
//   - an entry whose routability we cannot give (routability.go) is left unsatisfied: it binds
//     and asks for nothing, and a Gateway with no entry satisfied is not programmed
//     (AddressNotAssigned); the AddressesAssigned condition lists them.
//
// Whether a valid address is local to a proxy only the proxy knows: it binds what it can and
// reports the rest, which the status writer turns into AddressNotUsable.
func (t *session) gatewayAddresses(g *gatewayState) {
	asks := len(g.gw.Spec.Addresses) == 0
	var asking gwapiv1.GatewayAddressRoutabilityType // the routability of the first entry that asks
	seen := map[string]bool{}
	g.routability = map[string]gwapiv1.GatewayAddressRoutabilityType{}
	for i, a := range g.gw.Spec.Addresses {
		field := fmt.Sprintf("spec.addresses[%d]", i)
		if typ := addressType(a.Type); typ != gwapiv1.IPAddressType {
			msg := fmt.Sprintf("address type %q is not supported; only IPAddress", typ)
			g.reject(gwapiv1.GatewayReasonUnsupportedAddress, field+": "+msg)
			t.gatewayProblem(g, field+".type", string(gwapiv1.GatewayReasonUnsupportedAddress), msg)
			g.unsatisfied = append(g.unsatisfied, field+": "+msg)
			continue
		}
		if why := RoutabilityUnsupported(a.Routability); why != "" {
			// GEP-5093: an entry whose routability cannot be given is left unsatisfied, never
			// served with another scope; the other entries are served (PartiallyAssigned). A
			// valid request this build cannot give, like a used-up pool: a condition, no problem.
			g.unsatisfied = append(g.unsatisfied, field+".routability: "+why)
			continue
		}
		if a.Value == "" {
			if !asks {
				asking = a.Routability
			}
			asks = true
			continue
		}
		ip, why := staticAddress(a.Value)
		if why != "" {
			msg := fmt.Sprintf("%q %s", a.Value, why)
			g.noAddress(gwapiv1.GatewayReasonAddressNotUsable, field+": "+msg)
			t.gatewayProblem(g, field+".value", string(gwapiv1.GatewayReasonAddressNotUsable), msg)
			g.unsatisfied = append(g.unsatisfied, field+": "+msg)
			continue
		}
		if s := ip.String(); !seen[s] {
			seen[s] = true
			g.addresses = append(g.addresses, s)
			g.routability[s] = a.Routability
		}
	}
	if asks {
		a, ok := t.opts.GatewayAddresses[g.key]
		switch {
		case ok:
			if s := a.Unmap().String(); !seen[s] {
				g.addresses = append(g.addresses, s)
				g.routability[s] = asking
			}
		case len(g.addresses) > 0 || g.addrMsg != "":
			if len(g.gw.Spec.Addresses) > 0 {
				g.unsatisfied = append(g.unsatisfied, "an IPAddress entry without a value gets no address: "+
					"no --gateway-address-pool address is free for it, and a Gateway naming addresses is not bound on every address")
			}
		case t.opts.AssignsAddresses && g.key.Namespace != translation.ImplicitNamespace:
			// An implicit Gateway (Ingress) binds what its flag says, never a pool address.
			g.noAddress(gwapiv1.GatewayReasonAddressNotAssigned,
				"The address pool has no free address: free one (delete a Gateway) or widen --gateway-address-pool")
			g.unsatisfied = append(g.unsatisfied, g.addrMsg)
		default:
			g.addresses = []string{""}
			if t.opts.Routability {
				for _, sa := range t.opts.StatusAddresses {
					r := asking
					sa.Routability = &r
					g.published = append(g.published, sa)
				}
			}
		}
	}
	if len(g.addresses) == 0 && len(g.unsatisfied) > 0 && g.rejectReason == "" {
		g.noAddress(gwapiv1.GatewayReasonAddressNotAssigned, "no spec.addresses entry can be satisfied: "+strings.Join(g.unsatisfied, "; "))
	}
	sort.Strings(g.addresses)
}

// noAddress marks the Gateway as having no address to bind; the first reason found is reported.
func (g *gatewayState) noAddress(reason gwapiv1.GatewayConditionReason, msg string) {
	if g.addrMsg == "" {
		g.addrReason, g.addrMsg = reason, msg
	}
}

func addressType(t *gwapiv1.AddressType) gwapiv1.AddressType {
	if t == nil {
		return gwapiv1.IPAddressType
	}
	return *t
}

// staticAddress parses an IPAddress value a listener can bind, or says why it is not one.
func staticAddress(v string) (netip.Addr, string) {
	ip, err := netip.ParseAddr(v)
	switch {
	case err != nil:
		return ip, "is not an IP address (IPAddress values are IPv4 or IPv6 addresses, e.g. 192.0.2.10 or 2001:db8::10)"
	case ip.Zone() != "":
		return ip, "has an IPv6 zone; a Gateway address cannot name an interface"
	}
	ip = ip.Unmap()
	switch {
	case ip.IsUnspecified():
		return ip, "is the unspecified address; to listen on every address, leave spec.addresses empty"
	case ip.IsMulticast() || ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return ip, "is not a unicast address"
	}
	return ip, ""
}

// translateListener validates listener i of the Gateway, or of its ListenerSet owner.
func (t *session) translateListener(g *gatewayState, owner *listenerSetState, spec *gwapiv1.Listener, i int) *listenerState {
	l := &listenerState{
		gw: g, owner: owner, index: i, spec: spec,
		name:       g.key.Namespace + "/" + g.key.Name + "/" + owner.sectionPrefix() + string(spec.Name),
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
	t.frontendValidation(l)
	t.listenerFilters(l, spec.Filters)
	return l
}

func (t *session) rejectListener(l *listenerState, field string, reason gwapiv1.ListenerConditionReason, msg string) {
	if l.accepted.ok {
		l.accepted = condState{reason: string(reason), msg: l.field(field) + ": " + msg}
	}
	t.listenerProblem(l, field, reason, msg)
}

func (t *session) unresolvedListener(l *listenerState, field string, reason gwapiv1.ListenerConditionReason, msg string) {
	if l.resolved.ok {
		l.resolved = condState{reason: string(reason), msg: l.field(field) + ": " + msg}
	}
	t.listenerProblem(l, field, reason, msg)
}

// listenerProblem reports a problem of listener l on the object that declares it.
func (t *session) listenerProblem(l *listenerState, field string, reason gwapiv1.ListenerConditionReason, msg string) {
	if l.owner != nil {
		t.problem(listenerSetKind, l.owner.key.Namespace, l.owner.key.Name, l.field(field), string(reason), msg)
		return
	}
	t.gatewayProblem(l.gw, l.field(field), string(reason), msg)
}

func (t *session) protocolSupported(p gwapiv1.ProtocolType) bool {
	return len(t.kindsFor(p)) > 0
}

// kindsFor lists the route kinds that attach to listeners of protocol p.
func (t *session) kindsFor(p gwapiv1.ProtocolType) []translation.RouteKind {
	var out []translation.RouteKind
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
// listener's protocol, or every such kind when the listener names none. A kind whose routes name
// no parent (translation.ImplicitParentKind: Ingress) is a kind of the implicit Gateways only:
// it is not a Gateway API route kind, so an operator's listener neither lists nor accepts it.
func (t *session) listenerKinds(l *listenerState) {
	avail := t.kindsFor(l.spec.Protocol)
	if l.gw.key.Namespace != translation.ImplicitNamespace {
		avail = slices.DeleteFunc(slices.Clone(avail), func(k translation.RouteKind) bool {
			_, implicit := k.(translation.ImplicitParentKind)
			return implicit
		})
	}
	if l.spec.AllowedRoutes == nil || len(l.spec.AllowedRoutes.Kinds) == 0 {
		for _, k := range avail {
			l.supportedKinds = append(l.supportedKinds, normalGroupKind(k.API().GroupKind()))
		}
		return
	}
	var bad []string
	for _, want := range l.spec.AllowedRoutes.Kinds {
		want = normalGroupKind(want)
		found := false
		for _, k := range avail {
			if sameGroupKind(k.API().GroupKind(), want) {
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
