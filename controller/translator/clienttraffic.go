package translator

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	policyv1a1 "github.com/coxswain-labs/coxswain/modules/api/policy/v1alpha1"
)

// clientTrafficPolicy is one ClientTrafficPolicy while it is translated.
type clientTrafficPolicy struct {
	obj     *policyv1a1.ClientTrafficPolicy
	key     PolicyKey
	invalid string // a spec the API server would have rejected (standalone files): nothing applies
	targets []*ctpTarget
}

// ctpTarget is one ancestor of a ClientTrafficPolicy: a Gateway, or one of its listeners.
type ctpTarget struct {
	policyTarget
	p       *clientTrafficPolicy
	gw      *gatewayState
	section gwapiv1.SectionName // "" for the whole Gateway
	// What happened on the listeners it covers, for the Accepted message, each once.
	overridden, ignored, blocked []string
	covered, applied             int
}

// ctpAncestor names an ancestor: a Gateway, or one listener of it.
type ctpAncestor struct {
	gw      types.NamespacedName
	section gwapiv1.SectionName
}

// clientSettings is what a Gateway listener asks of its socket; the zero value is no policy.
type clientSettings struct {
	proxyProtocol, v1, v2 bool
	hops                  uint32
	http3, allow0RTT      bool
}

func (s clientSettings) String() string {
	var parts []string
	if s.proxyProtocol {
		v := "V1 and V2"
		switch {
		case s.v1 && !s.v2:
			v = "V1"
		case s.v2 && !s.v1:
			v = "V2"
		}
		parts = append(parts, "PROXY protocol "+v)
	}
	if s.hops > 0 {
		parts = append(parts, fmt.Sprintf("%d trusted X-Forwarded-For hops", s.hops))
	}
	if s.http3 {
		h3 := "HTTP/3"
		if s.allow0RTT {
			h3 += " with 0-RTT"
		}
		parts = append(parts, h3)
	}
	if len(parts) == 0 {
		return "no PROXY protocol and the peer as client"
	}
	return strings.Join(parts, ", ")
}

// translateClientTrafficPolicies decides which ClientTrafficPolicy each Gateway listener takes:
// the oldest naming the listener (sectionName), else the oldest naming its Gateway, as GEP-713
// says the more specific target wins. The sockets take them when the snapshot is assembled
// (socketSettings).
func (t *session) translateClientTrafficPolicies() {
	pols := append([]*policyv1a1.ClientTrafficPolicy(nil), t.store.ClientTrafficPolicies...)
	sort.Slice(pols, func(i, j int) bool { return olderFirst(pols[i], pols[j]) })
	winners := map[ctpAncestor]*ctpTarget{}
	for _, obj := range pols {
		p := &clientTrafficPolicy{obj: obj, key: PolicyKey{Group: policyv1a1.GroupName, Kind: policyv1a1.ClientTrafficPolicyKind,
			Namespace: obj.Namespace, Name: obj.Name}}
		if pp := obj.Spec.ProxyProtocol; pp != nil {
			for i, v := range pp.Versions {
				if v != policyv1a1.ProxyProtocolV1 && v != policyv1a1.ProxyProtocolV2 {
					p.invalid = fmt.Sprintf("spec.proxyProtocol.versions[%d]: unknown version %q (V1 or V2)", i, v)
				}
			}
		}
		if why := subjectHeaderInvalid(obj.Spec.ClientCertificate); why != "" && p.invalid == "" {
			p.invalid = why
		}
		p.targets = t.ctpTargets(p, winners)
		t.clientTrafficPolicies = append(t.clientTrafficPolicies, p)
	}
	// Listener policies first, so that a Gateway's yields to them.
	for _, whole := range []bool{false, true} {
		for _, p := range t.clientTrafficPolicies {
			for _, tg := range p.targets {
				if tg.state.ok && (tg.section == "") == whole {
					tg.claim()
				}
			}
		}
	}
}

func (t *session) ctpTargets(p *clientTrafficPolicy, winners map[ctpAncestor]*ctpTarget) []*ctpTarget {
	ns := p.obj.Namespace
	seen := map[gwapiv1.LocalPolicyTargetReferenceWithSectionName]bool{}
	var out []*ctpTarget
	for i, ref := range p.obj.Spec.TargetRefs {
		if seen[ref] {
			continue
		}
		seen[ref] = true
		gwKey := nn(ns, string(ref.Name))
		tg := &ctpTarget{p: p, gw: t.gwByKey[gwKey], section: ptr.Deref(ref.SectionName, ""), policyTarget: policyTarget{
			field: fmt.Sprintf("spec.targetRefs[%d]", i), ref: gatewayAncestor(ref.Group, ref.Kind, ns, ref.Name, ref.SectionName)}}
		anc := ctpAncestor{gwKey, tg.section}
		switch {
		case ref.Group != gwapiv1.GroupName || ref.Kind != "Gateway":
			tg.state = condState{reason: string(gwapiv1.PolicyReasonInvalid),
				msg: fmt.Sprintf("%s is a %s; only Gateways (group %s, kind Gateway) can be targeted", tg.field, groupKind(string(ref.Group), string(ref.Kind)), gwapiv1.GroupName)}
		case tg.gw == nil && t.gatewayExists(gwKey):
			continue // another controller's Gateway: none of our business
		case tg.gw == nil:
			tg.state = condState{reason: string(gwapiv1.PolicyReasonTargetNotFound), msg: fmt.Sprintf("%s: Gateway %s does not exist", tg.field, gwKey)}
		case tg.section != "" && tg.gw.listener(tg.section) == nil:
			tg.state = condState{reason: string(gwapiv1.PolicyReasonTargetNotFound), msg: fmt.Sprintf("%s.sectionName: Gateway %s has no listener %q", tg.field, gwKey, tg.section)}
		case p.invalid != "":
			tg.state = condState{reason: string(gwapiv1.PolicyReasonInvalid), msg: p.invalid}
		case winners[anc] != nil:
			w := winners[anc].p
			tg.state = condState{reason: string(gwapiv1.PolicyReasonConflicted),
				msg: fmt.Sprintf("%s %s/%s is older and targets %s too: it applies there, this policy does not", w.key.Kind, w.key.Namespace, w.key.Name, tg.describe())}
		default:
			winners[anc] = tg
			tg.state = condState{ok: true, reason: string(gwapiv1.PolicyReasonAccepted)}
		}
		if !tg.state.ok {
			t.fieldProblem(p.key.Kind, ns, p.obj.Name, tg.field, tg.state.reason, tg.state.msg)
		}
		out = append(out, tg)
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].ref, out[j].ref
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return ptr.Deref(a.SectionName, "") < ptr.Deref(b.SectionName, "")
	})
	return out
}

func (tg *ctpTarget) describe() string {
	if tg.section != "" {
		return fmt.Sprintf("listener %s of Gateway %s", tg.section, tg.gw.key)
	}
	return "Gateway " + tg.gw.key.String()
}

// claim gives the target's listeners the policy, unless a listener policy holds one already.
func (tg *ctpTarget) claim() {
	for _, l := range tg.gw.listeners {
		if tg.section != "" && (l.spec.Name != tg.section || l.owner != nil) {
			continue // a sectionName names one of the Gateway's own listeners
		}
		if l.clientPolicy != nil {
			other := l.clientPolicy.p.key
			tg.overridden = appendOnce(tg.overridden, fmt.Sprintf("%s (by %s %s/%s, which names it)", l.spec.Name, other.Kind, other.Namespace, other.Name))
			continue
		}
		l.clientPolicy = tg
		tg.covered++
		l.clientSettings() // notes the fields its protocol ignores, programmed or not
	}
}

func (g *gatewayState) listener(name gwapiv1.SectionName) *listenerState {
	for _, l := range g.listeners {
		if l.spec.Name == name && l.owner == nil {
			return l
		}
	}
	return nil
}

// clientSettings is what listener l asks of its socket; fields that do not apply to its protocol
// are left out and noted on the policy.
func (l *listenerState) clientSettings() clientSettings {
	tg := l.clientPolicy
	if tg == nil {
		return clientSettings{}
	}
	spec := tg.p.obj.Spec
	var s clientSettings
	if pp := spec.ProxyProtocol; pp != nil && pp.Enabled {
		if l.spec.Protocol == gwapiv1.UDPProtocolType {
			tg.ignored = appendOnce(tg.ignored, fmt.Sprintf("spec.proxyProtocol on UDP listener %s (PROXY protocol is for streams)", l.spec.Name))
		} else {
			s.proxyProtocol = true
			s.v1 = slices.Contains(pp.Versions, policyv1a1.ProxyProtocolV1)
			s.v2 = slices.Contains(pp.Versions, policyv1a1.ProxyProtocolV2)
		}
	}
	if x := spec.ClientIPDetection; x != nil && x.XForwardedFor != nil && ptr.Deref(x.XForwardedFor.NumTrustedHops, 0) > 0 {
		switch l.spec.Protocol {
		case gwapiv1.HTTPProtocolType, gwapiv1.HTTPSProtocolType:
			s.hops = *x.XForwardedFor.NumTrustedHops
		default:
			tg.ignored = appendOnce(tg.ignored, fmt.Sprintf("spec.clientIPDetection on %s listener %s (no HTTP requests)", l.spec.Protocol, l.spec.Name))
		}
	}
	if h3 := spec.HTTP3; h3 != nil && h3.Enabled {
		if l.spec.Protocol == gwapiv1.HTTPSProtocolType {
			s.http3, s.allow0RTT = true, h3.Allow0RTT
		} else {
			tg.ignored = appendOnce(tg.ignored, fmt.Sprintf("spec.http3 on %s listener %s (HTTPS listeners only)", l.spec.Protocol, l.spec.Name))
		}
	}
	l.noteSubjectHeader()
	return s
}

// socketSettings sets the ClientTrafficPolicy fields of socket il, whose Gateway listeners are
// members. PROXY protocol and client IP detection belong to the socket, so it takes them only
// when every listener on it asks for the same: a policy never changes a listener it does not
// target. Otherwise it takes none, and each policy there is blocked, naming the listener whose
// ask differs.
func (t *session) socketSettings(il *irv1.Listener, members []*listenerState) {
	if len(members) == 0 {
		return
	}
	asks := make([]clientSettings, len(members))
	agree := true
	for i, l := range members {
		asks[i] = l.clientSettings()
		agree = agree && asks[i] == asks[0]
	}
	if !agree {
		for i, l := range members {
			if l.clientPolicy == nil {
				continue
			}
			for j, o := range members {
				if asks[j] != asks[i] {
					l.clientPolicy.blocked = appendOnce(l.clientPolicy.blocked, fmt.Sprintf("listener %s shares socket %s with listener %s of Gateway %s, which asks for %s",
						l.spec.Name, il.Name, o.spec.Name, o.gw.key, o.describeAsk(asks[j])))
					break
				}
			}
		}
		return
	}
	for _, l := range members {
		if l.clientPolicy != nil && !l.appliedOn[il.Name] {
			if l.appliedOn == nil {
				l.appliedOn = map[string]bool{}
			}
			l.appliedOn[il.Name] = true
			if len(l.appliedOn) == 1 {
				l.clientPolicy.applied++
			}
		}
	}
	s := asks[0]
	if s.proxyProtocol {
		il.ProxyProtocol = &irv1.ProxyProtocol{V1: s.v1, V2: s.v2}
	}
	if s.hops > 0 {
		il.ClientIpDetection = &irv1.ClientIPDetection{XffNumTrustedHops: s.hops}
	}
	if s.http3 {
		// Clients reach the Gateway listener's port, which the socket's may not be (internal ports).
		il.Http3 = &irv1.HTTP3{AdvertisedPort: uint32(members[0].spec.Port), Allow_0Rtt: s.allow0RTT}
	}
}

func (l *listenerState) describeAsk(s clientSettings) string {
	if l.clientPolicy == nil {
		return "no ClientTrafficPolicy (" + s.String() + ")"
	}
	k := l.clientPolicy.p.key
	return fmt.Sprintf("%s (%s %s/%s)", s.String(), k.Kind, k.Namespace, k.Name)
}

// clientTrafficStatuses adds the status of every ClientTrafficPolicy with an ancestor of ours.
func (t *session) clientTrafficStatuses(res *Result) {
	for _, p := range t.clientTrafficPolicies {
		if len(p.targets) == 0 {
			continue
		}
		st := &gwapiv1.PolicyStatus{Ancestors: []gwapiv1.PolicyAncestorStatus{}}
		for _, tg := range p.targets {
			state := tg.state
			if state.ok {
				state = tg.outcome()
				if !state.ok {
					t.problem(p.key.Kind, p.obj.Namespace, p.obj.Name, tg.field, state.reason, state.msg)
				}
			}
			st.Ancestors = append(st.Ancestors, gwapiv1.PolicyAncestorStatus{
				AncestorRef:    tg.ref,
				ControllerName: gwapiv1.GatewayController(t.opts.ControllerName),
				Conditions: []metav1.Condition{t.cond(string(gwapiv1.PolicyConditionAccepted), state.ok, state.reason, state.msg,
					p.obj.Generation)},
			})
		}
		res.Policies[p.key] = st
	}
}

// outcome is the Accepted condition of a target that resolved: False (Conflicted) when every
// listener it covers shares a socket whose other listeners ask otherwise, else True saying where
// it applies and what it does not change.
func (tg *ctpTarget) outcome() condState {
	sort.Strings(tg.blocked)
	if len(tg.blocked) > 0 && tg.applied == 0 {
		return condState{reason: string(gwapiv1.PolicyReasonConflicted),
			msg: "Not applied (PROXY protocol, client IP detection and HTTP/3 are per socket): " + strings.Join(tg.blocked, "; ") +
				"; give the listeners their own port or address, or the same policy"}
	}
	msg := "Applied to " + tg.describe()
	if len(tg.blocked) > 0 {
		msg += "; not applied where " + strings.Join(tg.blocked, "; ")
	}
	if len(tg.overridden) > 0 {
		sort.Strings(tg.overridden)
		msg += "; overridden on listener " + strings.Join(tg.overridden, ", ")
	}
	if len(tg.ignored) > 0 {
		sort.Strings(tg.ignored)
		msg += "; ignored (not applicable): " + strings.Join(tg.ignored, "; ")
	}
	return condState{ok: true, reason: string(gwapiv1.PolicyReasonAccepted), msg: msg}
}

func appendOnce(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}
