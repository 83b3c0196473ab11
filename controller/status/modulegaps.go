package status

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// RouteModuleGap is one route rule one proxy cannot serve as written, because its binary lacks a
// module the rule needs (controller.RouteModuleGap).
type RouteModuleGap struct {
	// Kind, Namespace and Name name the route; Rule is the index of the rule.
	Kind, Namespace, Name string
	Rule                  int
	// GatewayNamespace, GatewayName and Section name the Gateway listener it is served on.
	GatewayNamespace, GatewayName, Section string
	// Proxy is the node name of the proxy, Module the module ID its binary lacks.
	Proxy, Module string
	// Dropped says the rule is left out on that proxy (its match module is missing: requests
	// fall through to the other rules); otherwise the rule answers 500 there (a filter is
	// missing, and the spec forbids skipping a filter).
	Dropped bool
}

// Coxswain's own route parent condition for module gaps. No condition of the spec fits: the route
// is valid and Accepted, its references resolve, and it is not PartiallyInvalid (nothing in it is
// invalid); what is wrong is that some proxies' binaries cannot serve some of its rules. It is
// written only when False, so routes every proxy can serve carry no extra condition.
const (
	ConditionModulesAvailable = "coxswain-labs.dev/ModulesAvailable"
	ReasonModuleMissing       = "ModuleMissing"
)

// ModulesMissing records the route rules proxies cannot serve as written, replacing the previous
// set (none clears it), and queues every route whose gaps changed.
func (w *Writer) ModulesMissing(gaps []RouteModuleGap) {
	next := map[Key][]RouteModuleGap{}
	for _, g := range gaps {
		k := Key{Kind(g.Kind), types.NamespacedName{Namespace: g.Namespace, Name: g.Name}}
		next[k] = append(next[k], g)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, gs := range next {
		if !equalGapList(w.gaps[k], gs) {
			w.queue.Add(k)
		}
	}
	for k := range w.gaps {
		if _, ok := next[k]; !ok {
			w.queue.Add(k)
		}
	}
	w.gaps = next
}

func equalGapList(a, b []RouteModuleGap) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// withModuleGaps returns a copy of desired whose parent entries that gaps concern (the parentRef
// names the Gateway, and its sectionName, when set, the listener) carry ModulesAvailable=False,
// at the generation of their Accepted condition. answer is what the route kind's clients get from
// a rule that answers an error ("500" when empty). desired is not modified.
func withModuleGaps(desired *gwapiv1.RouteStatus, routeNS string, gaps []RouteModuleGap, answer string, now metav1.Time) *gwapiv1.RouteStatus {
	if desired == nil || len(gaps) == 0 {
		return desired
	}
	out := &gwapiv1.RouteStatus{Parents: make([]gwapiv1.RouteParentStatus, len(desired.Parents))}
	for i, p := range desired.Parents {
		var mine []RouteModuleGap
		for _, g := range gaps {
			if concerns(p.ParentRef, routeNS, g) {
				mine = append(mine, g)
			}
		}
		if len(mine) > 0 && meta.IsStatusConditionTrue(p.Conditions, string(gwapiv1.RouteConditionAccepted)) {
			var gen int64
			if c := meta.FindStatusCondition(p.Conditions, string(gwapiv1.RouteConditionAccepted)); c != nil {
				gen = c.ObservedGeneration
			}
			p.Conditions = append(append([]metav1.Condition(nil), p.Conditions...), metav1.Condition{
				Type: ConditionModulesAvailable, Status: metav1.ConditionFalse, Reason: ReasonModuleMissing,
				Message: gapMessage(mine, answer), ObservedGeneration: gen, LastTransitionTime: now,
			})
		}
		out.Parents[i] = p
	}
	return out
}

func concerns(ref gwapiv1.ParentReference, routeNS string, g RouteModuleGap) bool {
	if ref.Kind != nil && *ref.Kind != "Gateway" {
		return false
	}
	ns := routeNS
	if ref.Namespace != nil {
		ns = string(*ref.Namespace)
	}
	if ns != g.GatewayNamespace || string(ref.Name) != g.GatewayName {
		return false
	}
	return ref.SectionName == nil || string(*ref.SectionName) == g.Section
}

// gapMessage says which rule does what on which proxies, and why: "Rule 0 answers 500 on proxy
// p1 (module filter.x is not compiled into it)"; answer replaces "500" when set.
func gapMessage(gaps []RouteModuleGap, answer string) string {
	if answer == "" {
		answer = "500"
	}
	type effect struct {
		rule    int
		dropped bool
		module  string
	}
	proxies := map[effect]map[string]bool{}
	for _, g := range gaps {
		e := effect{g.Rule, g.Dropped, g.Module}
		if proxies[e] == nil {
			proxies[e] = map[string]bool{}
		}
		proxies[e][g.Proxy] = true
	}
	effects := make([]effect, 0, len(proxies))
	for e := range proxies {
		effects = append(effects, e)
	}
	sort.Slice(effects, func(i, j int) bool {
		a, b := effects[i], effects[j]
		if a.rule != b.rule {
			return a.rule < b.rule
		}
		return a.module < b.module
	})
	parts := make([]string, 0, len(effects))
	for _, e := range effects {
		names := make([]string, 0, len(proxies[e]))
		for p := range proxies[e] {
			names = append(names, p)
		}
		sort.Strings(names)
		what := "answers " + answer
		if e.dropped {
			what = "is left out"
		}
		parts = append(parts, fmt.Sprintf("rule %d %s on proxy %s (module %s is not compiled into it)",
			e.rule, what, strings.Join(names, ", "), e.module))
	}
	return capitalize(truncate(strings.Join(parts, "; ")+"; build those proxies with the module, or serve the route with proxies that have it", maxFailureMessage))
}
