package translator

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// BackendTLSPolicyKind is the Kind of gateway.networking.k8s.io/v1 BackendTLSPolicy.
const BackendTLSPolicyKind = "BackendTLSPolicy"

// backendTLSPolicy is one BackendTLSPolicy while it is translated. Its ancestors are the
// Gateways whose routes reach a Service port it targets (GEP-713: a backend policy's status is
// per Gateway), found as the routes' backends resolve.
type backendTLSPolicy struct {
	obj *gwapiv1.BackendTLSPolicy
	key PolicyKey
	// tls is the upstream TLS the policy asks for; with no usable CA it trusts nothing, so its
	// connections fail (the spec: an invalid CA reference must not fall back to cleartext).
	tls      *irv1.UpstreamTLS
	accepted condState // the policy itself: Accepted, NoValidCACertificate or Invalid
	resolved condState // ResolvedRefs: its caCertificateRefs
	// won are the targets this policy applies to; lost the ones an older policy took.
	won, lost []string
	ancestors map[types.NamespacedName]bool
}

// tlsTarget is what a BackendTLSPolicy applies to: a Service, or one named port of it.
type tlsTarget struct {
	svc     types.NamespacedName
	section string
}

// translateBackendTLSPolicies decides which BackendTLSPolicy applies to each Service (port): the
// oldest targeting it (creationTimestamp, then namespace/name); the others are Conflicted there.
// A policy naming a port and one naming the whole Service do not conflict: the port's applies to
// that port. It runs before the routes, whose clusters take the TLS as they are made.
func (t *session) translateBackendTLSPolicies() {
	pols := append([]*gwapiv1.BackendTLSPolicy(nil), t.store.BackendTLSPolicies...)
	sort.Slice(pols, func(i, j int) bool { return olderFirst(pols[i], pols[j]) })
	t.tlsTargets = map[tlsTarget]*backendTLSPolicy{}
	for _, obj := range pols {
		p := &backendTLSPolicy{obj: obj, ancestors: map[types.NamespacedName]bool{},
			key: PolicyKey{Group: gwapiv1.GroupName, Kind: BackendTLSPolicyKind, Namespace: obj.Namespace, Name: obj.Name}}
		t.compileBackendTLS(p)
		for i, ref := range obj.Spec.TargetRefs {
			field := fmt.Sprintf("spec.targetRefs[%d]", i)
			if ref.Group != "" || ref.Kind != "Service" {
				t.problem(p.key.Kind, obj.Namespace, obj.Name, field, string(gwapiv1.PolicyReasonInvalid),
					fmt.Sprintf("targets a %s; only Services (group \"\", kind Service) can be targeted", groupKind(string(ref.Group), string(ref.Kind))))
				continue
			}
			tg := tlsTarget{svc: nn(obj.Namespace, string(ref.Name))}
			if ref.SectionName != nil {
				tg.section = string(*ref.SectionName)
			}
			what := "Service " + tg.svc.String()
			if tg.section != "" {
				what += " port " + tg.section
			}
			if w := t.tlsTargets[tg]; w != nil {
				p.lost = append(p.lost, fmt.Sprintf("%s %s/%s is older and targets %s too", w.key.Kind, w.key.Namespace, w.key.Name, what))
				continue
			}
			t.tlsTargets[tg] = p
			p.won = append(p.won, what)
		}
		if p.accepted.ok && len(p.won) == 0 && len(p.lost) > 0 {
			p.accepted = condState{reason: string(gwapiv1.PolicyReasonConflicted), msg: strings.Join(p.lost, "; ") + ": it applies there, this policy does not"}
		}
		if !p.accepted.ok {
			t.problem(p.key.Kind, obj.Namespace, obj.Name, "", p.accepted.reason, p.accepted.msg)
		}
		t.tlsPolicies = append(t.tlsPolicies, p)
	}
}

// compileBackendTLS resolves p's validation into its UpstreamTLS and its two conditions.
func (t *session) compileBackendTLS(p *backendTLSPolicy) {
	v := p.obj.Spec.Validation
	p.tls = &irv1.UpstreamTLS{ServerName: string(v.Hostname)}
	for _, san := range v.SubjectAltNames {
		switch san.Type {
		case gwapiv1.HostnameSubjectAltNameType:
			p.tls.SubjectAltNames = append(p.tls.SubjectAltNames, &irv1.SubjectAltName{Type: irv1.SubjectAltName_HOSTNAME, Value: string(san.Hostname)})
		case gwapiv1.URISubjectAltNameType:
			p.tls.SubjectAltNames = append(p.tls.SubjectAltNames, &irv1.SubjectAltName{Type: irv1.SubjectAltName_URI, Value: string(san.URI)})
		}
	}
	p.accepted = condState{ok: true, reason: string(gwapiv1.PolicyReasonAccepted), msg: "Accepted"}
	p.resolved = condState{ok: true, reason: string(gwapiv1.BackendTLSPolicyReasonResolvedRefs), msg: "All references are resolved"}
	if wk := v.WellKnownCACertificates; wk != nil && *wk != "" {
		if *wk != gwapiv1.WellKnownCACertificatesSystem {
			p.accepted = condState{reason: string(gwapiv1.PolicyReasonInvalid), msg: fmt.Sprintf("wellKnownCACertificates %q is not supported; only System is", *wk)}
			return
		}
		p.tls.SystemRoots = true
	}
	var bad []string
	valid := 0
	for i, ref := range v.CACertificateRefs {
		pemBytes, reason, err := t.caBundle(p.obj.Namespace, ref)
		if err != nil {
			if p.resolved.ok {
				p.resolved = condState{reason: string(reason)}
			}
			bad = append(bad, fmt.Sprintf("caCertificateRefs[%d]: %v", i, err))
			continue
		}
		valid++
		p.tls.CaPem = append(p.tls.CaPem, pemBytes...)
	}
	if len(bad) > 0 {
		p.resolved.msg = strings.Join(bad, "; ")
		t.problem(p.key.Kind, p.obj.Namespace, p.obj.Name, "spec.validation.caCertificateRefs", p.resolved.reason, p.resolved.msg)
	}
	if valid == 0 && !p.tls.SystemRoots {
		msg := "no valid CA certificate: connections to the targets fail"
		if len(bad) > 0 {
			msg = p.resolved.msg + ": " + msg
		}
		p.accepted = condState{reason: string(gwapiv1.BackendTLSPolicyReasonNoValidCACertificate), msg: msg}
	}
}

// caBundle reads the CA certificates of one caCertificateRef (readCA): a ConfigMap or Secret in
// the policy's namespace, or a ClusterTrustBundle.
func (t *session) caBundle(ns string, ref gwapiv1.LocalObjectReference) ([]byte, gwapiv1.PolicyConditionReason, error) {
	b, fault, err := t.readCA(caSource{group: string(ref.Group), kind: string(ref.Kind), name: string(ref.Name), ns: ns, secrets: true})
	return b, caPolicyReasons[fault], err
}

// backendTLSFor returns the UpstreamTLS of a cluster of Service svc port sp reached from listener
// l (nil outside a listener's build), or nil for cleartext, and records l's Gateway as an ancestor
// of every policy targeting the port. Layer-4 clusters get TLS only behind a terminating TLS
// listener: a passthrough listener's client already speaks TLS to the backend.
func (t *session) backendTLSFor(l *listenerState, svc *corev1.Service, sp *corev1.ServicePort, proto irv1.Cluster_Protocol) *irv1.UpstreamTLS {
	if len(t.tlsTargets) == 0 {
		return nil
	}
	key := nn(svc.Namespace, svc.Name)
	whole, port := t.tlsTargets[tlsTarget{svc: key}], t.tlsTargets[tlsTarget{svc: key, section: sp.Name}]
	if sp.Name == "" {
		port = nil
	}
	if l != nil {
		for _, p := range t.tlsPolicies {
			if p.targets(key, sp.Name) {
				p.ancestors[l.gw.key] = true
				t.notReplayable() // a mark outside the route, which a replay would not leave
			}
		}
	}
	p := port
	if p == nil {
		p = whole
	}
	if p == nil {
		return nil
	}
	switch proto {
	case irv1.Cluster_UDP:
		return nil
	case irv1.Cluster_TCP:
		if l == nil || l.spec.Protocol != gwapiv1.TLSProtocolType || l.passthrough {
			return nil
		}
	}
	return p.tls
}

// targets reports whether p names Service svc or its port named port.
func (p *backendTLSPolicy) targets(svc types.NamespacedName, port string) bool {
	for _, ref := range p.obj.Spec.TargetRefs {
		if ref.Group != "" || ref.Kind != "Service" || string(ref.Name) != svc.Name || p.obj.Namespace != svc.Namespace {
			continue
		}
		if ref.SectionName == nil || *ref.SectionName == "" || (port != "" && string(*ref.SectionName) == port) {
			return true
		}
	}
	return false
}

// backendTLSStatuses adds the status of every BackendTLSPolicy to res: one ancestor entry per
// Gateway that reaches a target, with Accepted and ResolvedRefs.
func (t *session) backendTLSStatuses(res *Result) {
	for _, p := range t.tlsPolicies {
		st := &gwapiv1.PolicyStatus{Ancestors: []gwapiv1.PolicyAncestorStatus{}}
		gws := make([]types.NamespacedName, 0, len(p.ancestors))
		for g := range p.ancestors {
			gws = append(gws, g)
		}
		sort.Slice(gws, func(i, j int) bool { return gws[i].String() < gws[j].String() })
		acc := p.accepted
		if acc.ok && len(p.lost) > 0 {
			acc.msg += "; not applied where " + strings.Join(p.lost, "; ")
		}
		for _, g := range gws {
			st.Ancestors = append(st.Ancestors, gwapiv1.PolicyAncestorStatus{
				AncestorRef: gwapiv1.ParentReference{Group: ptr.To(gwapiv1.Group(gwapiv1.GroupName)), Kind: ptr.To(gwapiv1.Kind("Gateway")),
					Namespace: ptr.To(gwapiv1.Namespace(g.Namespace)), Name: gwapiv1.ObjectName(g.Name)},
				ControllerName: gwapiv1.GatewayController(t.opts.ControllerName),
				Conditions: []metav1.Condition{
					t.cond(string(gwapiv1.PolicyConditionAccepted), acc.ok, acc.reason, acc.msg, p.obj.Generation),
					t.cond(string(gwapiv1.BackendTLSPolicyConditionResolvedRefs), p.resolved.ok, p.resolved.reason, p.resolved.msg, p.obj.Generation),
				},
			})
		}
		res.Policies[p.key] = st
	}
}
