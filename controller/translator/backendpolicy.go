package translator

import (
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	policyv1a1 "github.com/coxswain-labs/coxswain/modules/api/policy/v1alpha1"
)

// PolicyKey names one policy object of any policy kind (Result.Policies).
type PolicyKey struct {
	Group     string
	Kind      string
	Namespace string
	Name      string
}

func (k PolicyKey) String() string { return k.Kind + " " + k.Namespace + "/" + k.Name }

// backendPolicy is one CoxswainBackendPolicy while it is translated.
type backendPolicy struct {
	obj      *policyv1a1.CoxswainBackendPolicy
	key      PolicyKey
	settings clusterSettings
	ignored  []ignored
	targets  []*policyTarget // one per distinct targetRef, sorted by kind and name
}

// policyTarget is one ancestor of a policy: the object a targetRef names, and whether the policy
// applies to it.
type policyTarget struct {
	ref   gwapiv1.ParentReference
	field string // the first targetRef naming it
	state condState
}

// translateBackendPolicies decides which CoxswainBackendPolicy applies to each Service: per
// Service the oldest policy targeting it (creationTimestamp, then name); the others are
// Conflicted for that Service. It runs before the routes, whose clusters take the settings as
// they are made (resolveBackend).
func (t *session) translateBackendPolicies() {
	pols := append([]*policyv1a1.CoxswainBackendPolicy(nil), t.store.BackendPolicies...)
	sort.Slice(pols, func(i, j int) bool { return olderFirst(pols[i], pols[j]) })
	t.servicePolicies = map[types.NamespacedName]*backendPolicy{}
	for _, obj := range pols {
		p := &backendPolicy{obj: obj, key: PolicyKey{Group: policyv1a1.GroupName, Kind: policyv1a1.BackendPolicyKind,
			Namespace: obj.Namespace, Name: obj.Name}}
		p.settings, p.ignored = t.settingsOf(&obj.Spec)
		sort.SliceStable(p.ignored, func(i, j int) bool { return p.ignored[i].field < p.ignored[j].field })
		for _, ig := range p.ignored {
			w := &Problem{Kind: p.key.Kind, Namespace: obj.Namespace, Name: obj.Name, Field: ig.field, Reason: ReasonWarning, Message: ig.why}
			t.warnings[w.Error()] = w
		}
		p.targets = t.policyTargets(p)
		if len(obj.Spec.TargetRefs) == 0 {
			t.problem(p.key.Kind, obj.Namespace, obj.Name, "spec.targetRefs", string(gwapiv1.PolicyReasonInvalid), "no targetRefs: the policy applies to nothing")
		}
		t.backendPolicies = append(t.backendPolicies, p)
	}
}

// policyTargets resolves the targetRefs of p, claiming the Services no older policy claimed.
func (t *session) policyTargets(p *backendPolicy) []*policyTarget {
	ns := p.obj.Namespace
	seen := map[gwapiv1.LocalPolicyTargetReference]bool{}
	var out []*policyTarget
	for i, ref := range p.obj.Spec.TargetRefs {
		if seen[ref] {
			continue
		}
		seen[ref] = true
		tg := &policyTarget{field: fmt.Sprintf("spec.targetRefs[%d]", i), ref: gwapiv1.ParentReference{
			Group: ptr.To(ref.Group), Kind: ptr.To(ref.Kind), Namespace: ptr.To(gwapiv1.Namespace(ns)), Name: ref.Name,
		}}
		svc := nn(ns, string(ref.Name))
		switch winner := t.servicePolicies[svc]; {
		case ref.Group != "" || ref.Kind != "Service":
			tg.state = condState{reason: string(gwapiv1.PolicyReasonInvalid),
				msg: fmt.Sprintf("%s is a %s; only Services (group \"\", kind Service) can be targeted", tg.field, groupKind(string(ref.Group), string(ref.Kind)))}
		case t.services[svc] == nil:
			tg.state = condState{reason: string(gwapiv1.PolicyReasonTargetNotFound), msg: fmt.Sprintf("%s: Service %s does not exist", tg.field, svc)}
		case winner != nil:
			tg.state = condState{reason: string(gwapiv1.PolicyReasonConflicted),
				msg: fmt.Sprintf("%s %s/%s is older and targets Service %s too: it applies there, this policy does not", winner.key.Kind, winner.key.Namespace, winner.key.Name, svc)}
		default:
			t.servicePolicies[svc] = p
			tg.state = condState{ok: true, reason: string(gwapiv1.PolicyReasonAccepted), msg: fmt.Sprintf("Applied to Service %s", svc)}
		}
		if !tg.state.ok {
			t.fieldProblem(p.key.Kind, ns, p.obj.Name, tg.field, tg.state.reason, tg.state.msg)
		}
		out = append(out, tg)
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].ref, out[j].ref
		if *a.Group != *b.Group {
			return *a.Group < *b.Group
		}
		if *a.Kind != *b.Kind {
			return *a.Kind < *b.Kind
		}
		return a.Name < b.Name
	})
	return out
}

// applyBackendPolicy sets the settings of the policy that applies to Service svc, if any, on a
// cluster of it.
func (t *session) applyBackendPolicy(c *irv1.Cluster, svc types.NamespacedName) {
	if p := t.servicePolicies[svc]; p != nil {
		p.settings.apply(c, func() []byte { return t.sessionKey(c.GetName()) })
	}
}

// sessionKey is the key a cluster's session cookies are made with: HMAC-SHA256(SessionKey,
// cluster name). It depends on nothing but the two, so every translation of every replica given
// the same SessionKey gives the same key, and a proxy's tokens survive a new snapshot.
func (t *session) sessionKey(cluster string) []byte {
	m := hmac.New(sha256.New, t.opts.SessionKey)
	m.Write([]byte(cluster))
	return m.Sum(nil)
}

// backendPolicyStatuses adds the status of every policy to res: one ancestor entry per target,
// each with an Accepted condition whose message lists the fields that were ignored.
func (t *session) backendPolicyStatuses(res *Result) {
	for _, p := range t.backendPolicies {
		st := &gwapiv1.PolicyStatus{Ancestors: []gwapiv1.PolicyAncestorStatus{}}
		for _, tg := range p.targets {
			msg := tg.state.msg
			if tg.state.ok && len(p.ignored) > 0 {
				msg += "; ignored (the defaults apply): " + ignoredSummary(p.ignored)
			}
			st.Ancestors = append(st.Ancestors, gwapiv1.PolicyAncestorStatus{
				AncestorRef:    tg.ref,
				ControllerName: gwapiv1.GatewayController(t.opts.ControllerName),
				Conditions: []metav1.Condition{t.cond(string(gwapiv1.PolicyConditionAccepted), tg.state.ok, tg.state.reason, msg,
					p.obj.Generation)},
			})
		}
		res.Policies[p.key] = st
	}
}

func ignoredSummary(ign []ignored) string {
	parts := make([]string, len(ign))
	for i, ig := range ign {
		parts[i] = ig.field + ": " + ig.why
	}
	return strings.Join(parts, "; ")
}
