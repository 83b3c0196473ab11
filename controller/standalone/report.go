package standalone

import (
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller/translator"
)

// Report is what `coxswain validate` prints and the admin /status serves: the status the
// controller would write for each object, every problem the translator found, and every document
// the loader left out, each with the file it came from.
type Report struct {
	// Version is the snapshot version the configuration translates to.
	Version        string         `json:"version,omitempty"`
	GatewayClasses []ObjectStatus `json:"gatewayClasses,omitempty"`
	Gateways       []ObjectStatus `json:"gateways,omitempty"`
	// ListenerSets are the ListenerSets of our Gateways, by namespace and name.
	ListenerSets []ObjectStatus `json:"listenerSets,omitempty"`
	// Routes are the routes of every kind, by kind, namespace and name.
	Routes []ObjectStatus `json:"routes,omitempty"`
	// Policies are the policies of every kind (CoxswainBackendPolicy, ClientTrafficPolicy, Gateway-targeting CoxswainExternalAuth), by kind, namespace and
	// name, each with one ancestor entry per target.
	Policies []ObjectStatus  `json:"policies,omitempty"`
	Problems []ReportProblem `json:"problems,omitempty"`
	// Warnings are what was accepted but is not served as written (not errors).
	Warnings   []ReportProblem `json:"warnings,omitempty"`
	LoadErrors []*Error        `json:"loadErrors,omitempty"`
	// Kept are the objects whose documents broke since the last applied load and whose last good
	// version keeps serving.
	Kept []Kept `json:"kept,omitempty"`
	// Notes are hints about objects that are valid but ignored (e.g. another controller's class).
	Notes []string `json:"notes,omitempty"`
	// Failures lists the False Accepted/ResolvedRefs conditions, one line each.
	Failures []string `json:"failures,omitempty"`
}

// ObjectStatus is the status of one object, where it came from, and the status itself (a
// GatewayClassStatus, GatewayStatus or RouteStatus).
type ObjectStatus struct {
	// Kind is set in Report.Routes and Report.Policies, whose entries are of several kinds.
	Kind      string `json:"kind,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	Source    string `json:"source,omitempty"`
	Status    any    `json:"status"`
}

// ReportProblem is a translator Problem with the file of the object it is about.
type ReportProblem struct {
	Source  string `json:"source,omitempty"`
	Object  string `json:"object"`
	Field   string `json:"field,omitempty"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// HasErrors reports whether anything is wrong: a document left out, a problem, or a False
// Accepted or ResolvedRefs condition.
func (r *Report) HasErrors() bool {
	return len(r.LoadErrors) > 0 || len(r.Problems) > 0 || len(r.Failures) > 0
}

// BuildReport assembles the report of one load and its translation. tr may be nil when nothing
// was translated.
func BuildReport(res *Result, tr *translator.Result, controllerName string) *Report {
	rep := &Report{LoadErrors: res.Errors, Kept: res.Kept}
	if tr == nil {
		return rep
	}
	if tr.Snapshot != nil {
		rep.Version = tr.Snapshot.GetVersion()
	}
	src := func(kind string, nn types.NamespacedName) string {
		if s, ok := res.Sources[ObjectRef{Kind: kind, Namespace: nn.Namespace, Name: nn.Name}]; ok {
			return s.String()
		}
		return ""
	}
	for _, nn := range sortedKeys(tr.GatewayClasses) {
		st := tr.GatewayClasses[nn]
		rep.GatewayClasses = append(rep.GatewayClasses, ObjectStatus{Name: nn.Name, Source: src("GatewayClass", nn), Status: st})
		rep.failed("GatewayClass "+nn.Name, st.Conditions)
	}
	for _, nn := range sortedKeys(tr.Gateways) {
		st := tr.Gateways[nn]
		rep.Gateways = append(rep.Gateways, ObjectStatus{Namespace: nn.Namespace, Name: nn.Name, Source: src("Gateway", nn), Status: st})
		obj := "Gateway " + nn.String()
		rep.failed(obj, st.Conditions)
		for _, l := range st.Listeners {
			rep.failed(fmt.Sprintf("%s listener %s", obj, l.Name), l.Conditions)
		}
	}
	for _, nn := range sortedKeys(tr.ListenerSets) {
		st := tr.ListenerSets[nn]
		rep.ListenerSets = append(rep.ListenerSets, ObjectStatus{Namespace: nn.Namespace, Name: nn.Name, Source: src("ListenerSet", nn), Status: st})
		obj := "ListenerSet " + nn.String()
		rep.failed(obj, st.Conditions)
		for _, l := range st.Listeners {
			rep.failed(fmt.Sprintf("%s listener %s", obj, l.Name), l.Conditions)
		}
	}
	for _, key := range sortedRouteKeys(tr.Routes) {
		nn := types.NamespacedName{Namespace: key.Namespace, Name: key.Name}
		st := tr.Routes.Get(key)
		rep.Routes = append(rep.Routes, ObjectStatus{Kind: key.Kind, Namespace: key.Namespace, Name: key.Name, Source: src(key.Kind, nn), Status: st})
		for _, p := range st.Parents {
			rep.failed(fmt.Sprintf("%s %s parent %s", key.Kind, nn, parentName(p.ParentRef, nn.Namespace)), p.Conditions)
		}
	}
	for _, key := range sortedPolicyKeys(tr.Policies) {
		nn := types.NamespacedName{Namespace: key.Namespace, Name: key.Name}
		st := tr.Policies[key]
		rep.Policies = append(rep.Policies, ObjectStatus{Kind: key.Kind, Namespace: key.Namespace, Name: key.Name, Source: src(key.Kind, nn), Status: st})
		for _, a := range st.Ancestors {
			rep.failed(fmt.Sprintf("%s %s for %s %s", key.Kind, nn, kindOf(a.AncestorRef), parentName(a.AncestorRef, nn.Namespace)), a.Conditions)
		}
	}
	rep.Problems = reportProblems(res, tr.Problems)
	rep.Warnings = reportProblems(res, tr.Warnings)
	rep.Notes = ignoredNotes(res, tr, controllerName)
	return rep
}

// failed records the False Accepted and ResolvedRefs conditions of one object.
func (r *Report) failed(obj string, conds []metav1.Condition) {
	for _, c := range conds {
		if c.Status != metav1.ConditionFalse {
			continue
		}
		if c.Type == string(gwapiv1.GatewayConditionAccepted) || c.Type == string(gwapiv1.RouteConditionResolvedRefs) {
			r.Failures = append(r.Failures, fmt.Sprintf("%s: %s=False (%s): %s", obj, c.Type, c.Reason, c.Message))
		}
	}
}

// ignoredNotes explains objects no status was computed for, the most common first-run surprise:
// a GatewayClass naming another controller, or a Gateway of a class that is not ours.
func ignoredNotes(res *Result, tr *translator.Result, controllerName string) []string {
	var notes []string
	for _, gc := range res.Store.GatewayClasses {
		if _, ok := tr.GatewayClasses[types.NamespacedName{Name: gc.Name}]; !ok {
			notes = append(notes, fmt.Sprintf("GatewayClass %s is ignored: its controllerName is %q, this coxswain answers to %q (--controller-name)",
				gc.Name, gc.Spec.ControllerName, controllerName))
		}
	}
	for _, gw := range res.Store.Gateways {
		if _, ok := tr.Gateways[types.NamespacedName{Namespace: gw.Namespace, Name: gw.Name}]; !ok {
			notes = append(notes, fmt.Sprintf("Gateway %s/%s is ignored: GatewayClass %q is not one of ours", gw.Namespace, gw.Name, gw.Spec.GatewayClassName))
		}
	}
	return notes
}

func parentName(p gwapiv1.ParentReference, routeNS string) string {
	ns := routeNS
	if p.Namespace != nil {
		ns = string(*p.Namespace)
	}
	s := ns + "/" + string(p.Name)
	if p.SectionName != nil {
		s += "/" + string(*p.SectionName)
	}
	if p.Port != nil {
		s += fmt.Sprintf(":%d", *p.Port)
	}
	return s
}

func sortedKeys[V any](m map[types.NamespacedName]V) []types.NamespacedName {
	keys := make([]types.NamespacedName, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Namespace != keys[j].Namespace {
			return keys[i].Namespace < keys[j].Namespace
		}
		return keys[i].Name < keys[j].Name
	})
	return keys
}

func sortedRouteKeys(m translator.RouteStatuses) []translator.RouteKey {
	keys := make([]translator.RouteKey, 0, m.Len())
	for k := range m.All() {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return keys
}

func sortedPolicyKeys(m map[translator.PolicyKey]*gwapiv1.PolicyStatus) []translator.PolicyKey {
	keys := make([]translator.PolicyKey, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return keys
}

// kindOf is the kind a parent or ancestor reference names.
func kindOf(p gwapiv1.ParentReference) string {
	if p.Kind == nil {
		return "Gateway"
	}
	return string(*p.Kind)
}

func reportProblems(res *Result, ps []*translator.Problem) []ReportProblem {
	var out []ReportProblem
	for _, p := range ps {
		ref := ObjectRef{Kind: p.Kind, Namespace: p.Namespace, Name: p.Name}
		rp := ReportProblem{Object: ref.String(), Field: p.Field, Reason: p.Reason, Message: p.Message}
		if s, ok := res.Sources[ref]; ok {
			rp.Source = s.String()
		}
		out = append(out, rp)
	}
	return out
}
