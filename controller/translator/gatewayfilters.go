package translator

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// GatewayFilterKinds are the ExtensionRef kinds whose objects may also target Gateways
// (spec.targetRefs): such an object applies to every rule of the HTTPRoutes and GRPCRoutes on the
// Gateway as if the rule named it first as an ExtensionRef filter. It is a Gateway API policy
// (GEP-713, direct), with status.ancestors. A kind counts only when its filter.ext.* module is in
// the build; objects without targetRefs are plain ExtensionRef objects.
var GatewayFilterKinds = []schema.GroupKind{{Group: "gateway.coxswain-labs.dev", Kind: "CoxswainExternalAuth"}}

// gatewayFilter is one extension object that targets Gateways.
type gatewayFilter struct {
	obj     translation.Object
	gk      schema.GroupKind
	key     PolicyKey
	targets []*policyTarget
}

// translateGatewayFilters decides which object of each GatewayFilterKinds kind applies to each
// Gateway: the oldest targeting it; the others are Conflicted there. It runs after the Gateways,
// before the routes, whose rule filters take them (gatewayFilterConfigs).
func (t *session) translateGatewayFilters() {
	t.gatewayFilters = map[types.NamespacedName][]*gatewayFilter{}
	for _, gk := range GatewayFilterKinds {
		if _, ok := t.opts.Registry.Lookup(core.ExtensionModuleID(gk.Group, gk.Kind)); !ok {
			continue
		}
		objs := append([]translation.Object(nil), t.store.Objects[gk]...)
		sort.Slice(objs, func(i, j int) bool { return olderFirst(objs[i], objs[j]) })
		for _, obj := range objs {
			refs, err := targetRefsOf(obj)
			if err != nil || len(refs) == 0 {
				continue // a plain ExtensionRef object; a bad spec shows on the routes using it
			}
			f := &gatewayFilter{obj: obj, gk: gk, key: PolicyKey{Group: gk.Group, Kind: gk.Kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}}
			f.targets = t.gatewayFilterTargets(f, refs)
			t.gatewayFilterList = append(t.gatewayFilterList, f)
		}
	}
}

func targetRefsOf(obj translation.Object) ([]gwapiv1.LocalPolicyTargetReferenceWithSectionName, error) {
	spec, err := specOf(obj)
	if err != nil {
		return nil, err
	}
	var s struct {
		TargetRefs []gwapiv1.LocalPolicyTargetReferenceWithSectionName `json:"targetRefs"`
	}
	err = json.Unmarshal(spec, &s)
	return s.TargetRefs, err
}

func (t *session) gatewayFilterTargets(f *gatewayFilter, refs []gwapiv1.LocalPolicyTargetReferenceWithSectionName) []*policyTarget {
	ns := f.obj.GetNamespace()
	seen := map[gwapiv1.LocalPolicyTargetReferenceWithSectionName]bool{}
	var out []*policyTarget
	for i, ref := range refs {
		if seen[ref] {
			continue
		}
		seen[ref] = true
		gwKey := nn(ns, string(ref.Name))
		tg := &policyTarget{field: fmt.Sprintf("spec.targetRefs[%d]", i), ref: gatewayAncestor(ref.Group, ref.Kind, ns, ref.Name, nil)}
		switch {
		case ref.Group != gwapiv1.GroupName || ref.Kind != "Gateway":
			tg.state = condState{reason: string(gwapiv1.PolicyReasonInvalid),
				msg: fmt.Sprintf("%s is a %s; only Gateways (group %s, kind Gateway) can be targeted", tg.field, groupKind(string(ref.Group), string(ref.Kind)), gwapiv1.GroupName)}
		case ref.SectionName != nil:
			tg.state = condState{reason: string(gwapiv1.PolicyReasonInvalid),
				msg: fmt.Sprintf("%s.sectionName: a %s applies to a whole Gateway, not one listener", tg.field, f.gk.Kind)}
		case t.gwByKey[gwKey] == nil && t.gatewayExists(gwKey):
			continue // another controller's Gateway: none of our business
		case t.gwByKey[gwKey] == nil:
			tg.state = condState{reason: string(gwapiv1.PolicyReasonTargetNotFound), msg: fmt.Sprintf("%s: Gateway %s does not exist", tg.field, gwKey)}
		default:
			if winner := t.gatewayFilterOf(gwKey, f.gk); winner != nil {
				tg.state = condState{reason: string(gwapiv1.PolicyReasonConflicted),
					msg: fmt.Sprintf("%s %s/%s is older and targets Gateway %s too: it applies there, this one does not", winner.key.Kind, winner.key.Namespace, winner.key.Name, gwKey)}
				break
			}
			t.gatewayFilters[gwKey] = append(t.gatewayFilters[gwKey], f)
			tg.state = condState{ok: true, reason: string(gwapiv1.PolicyReasonAccepted),
				msg: fmt.Sprintf("Applied to every HTTPRoute and GRPCRoute rule on Gateway %s, before the rule's own filters", gwKey)}
		}
		if !tg.state.ok {
			t.fieldProblem(f.key.Kind, ns, f.obj.GetName(), tg.field, tg.state.reason, tg.state.msg)
		}
		out = append(out, tg)
	}
	sortTargets(out)
	return out
}

func (t *session) gatewayFilterOf(gw types.NamespacedName, gk schema.GroupKind) *gatewayFilter {
	for _, f := range t.gatewayFilters[gw] {
		if f.gk == gk {
			return f
		}
	}
	return nil
}

// gatewayExists reports whether the store has Gateway key, of any class.
func (t *session) gatewayExists(key types.NamespacedName) bool {
	return slices.ContainsFunc(t.store.Gateways, func(g *gwapiv1.Gateway) bool { return g.Namespace == key.Namespace && g.Name == key.Name })
}

// gatewayFilterConfigs are the configs of the objects that target the Gateway of the listener rc
// builds for, in GatewayFilterKinds order, resolved as ExtensionRefs of the object's own
// namespace. A route kind the object's module does not serve (core.ExtensionRouteKinds) does not
// take it. An object that cannot be used fails the rule, as an ExtensionRef would: a Gateway's
// mandate is never skipped.
func (t *session) gatewayFilterConfigs(rc *routeContext, field string, env translation.FilterEnv) ([]*irv1.ModuleConfig, *translation.Failure) {
	ns, name, ok := strings.Cut(rc.listener.Gateway, "/")
	if !ok {
		return nil, nil // the validation pass: no listener yet
	}
	var out []*irv1.ModuleConfig
	for _, f := range t.gatewayFilters[nn(ns, name)] {
		info, _ := t.opts.Registry.Lookup(core.ExtensionModuleID(f.gk.Group, f.gk.Kind))
		if rk, ok := info.New().(core.ExtensionRouteKinds); ok && env.Kind != "" {
			if supported, _ := rk.ExtensionRouteKinds(); !slices.Contains(supported, env.Kind) {
				continue
			}
		}
		what := fmt.Sprintf("%s %s/%s (targets Gateway %s/%s)", f.gk.Kind, f.key.Namespace, f.key.Name, ns, name)
		mc, fail := t.extensionConfig(rc, extensionUse{gk: f.gk, namespace: f.key.Namespace, name: f.key.Name, field: field, what: what}, env)
		if fail != nil {
			return nil, fail
		}
		if mc != nil {
			out = append(out, mc)
		}
	}
	return out, nil
}

// gatewayFilterStatuses adds the status of every object that targets Gateways to res.
func (t *session) gatewayFilterStatuses(res *Result) {
	for _, f := range t.gatewayFilterList {
		if len(f.targets) == 0 {
			continue
		}
		st := &gwapiv1.PolicyStatus{Ancestors: []gwapiv1.PolicyAncestorStatus{}}
		for _, tg := range f.targets {
			st.Ancestors = append(st.Ancestors, gwapiv1.PolicyAncestorStatus{
				AncestorRef:    tg.ref,
				ControllerName: gwapiv1.GatewayController(t.opts.ControllerName),
				Conditions: []metav1.Condition{t.cond(string(gwapiv1.PolicyConditionAccepted), tg.state.ok, tg.state.reason, tg.state.msg,
					f.obj.GetGeneration())},
			})
		}
		res.Policies[f.key] = st
	}
}

// gatewayAncestor is the ancestorRef of a policy target that names a Gateway (or another kind).
func gatewayAncestor(group gwapiv1.Group, kind gwapiv1.Kind, ns string, name gwapiv1.ObjectName, section *gwapiv1.SectionName) gwapiv1.ParentReference {
	return gwapiv1.ParentReference{Group: ptr.To(group), Kind: ptr.To(kind), Namespace: ptr.To(gwapiv1.Namespace(ns)), Name: name, SectionName: section}
}

// sortTargets orders the ancestors of a policy by group, kind, name and sectionName.
func sortTargets(out []*policyTarget) {
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].ref, out[j].ref
		if *a.Group != *b.Group {
			return *a.Group < *b.Group
		}
		if *a.Kind != *b.Kind {
			return *a.Kind < *b.Kind
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return ptr.Deref(a.SectionName, "") < ptr.Deref(b.SectionName, "")
	})
}
