package adminapi

import (
	"fmt"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller/translator"
)

// Problems is GET /api/v1/problems.
type Problems struct {
	Version      string    `json:"version"`
	TranslatedAt time.Time `json:"translatedAt"`
	Problems     []Problem `json:"problems"`
	Warnings     []Problem `json:"warnings"`
}

// ObjectRef names an object.
type ObjectRef struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	UID       string `json:"uid,omitempty"`
}

// Problem is one thing wrong: where, why and what usually fixes it.
type Problem struct {
	Object  ObjectRef `json:"object"`
	Field   string    `json:"field,omitempty"`
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
	Hint    string    `json:"hint,omitempty"`
	Source  string    `json:"source,omitempty"`
}

// ProblemsOf lists t's problems: the translator's (each with its field), and every False
// condition of an object we own that no translator problem already explains (a route whose
// backend is missing has both a Problem and a False ResolvedRefs: it is listed once).
func ProblemsOf(t *Translation) Problems {
	out := Problems{Version: t.Result.Snapshot.GetVersion(), TranslatedAt: t.At, Problems: []Problem{}, Warnings: []Problem{}}
	explained := map[ObjectRef]bool{}
	for _, p := range t.Result.Problems {
		ref := ObjectRef{Kind: p.Kind, Namespace: p.Namespace, Name: p.Name}
		explained[ref] = true
		out.Problems = append(out.Problems, fromTranslator(t, p))
	}
	for _, p := range t.Result.Warnings {
		out.Warnings = append(out.Warnings, fromTranslator(t, p))
	}
	add := func(ref ObjectRef, field string, conds []metav1.Condition) {
		if explained[ref] {
			return
		}
		for _, c := range conds {
			if falseMeansBroken(c) {
				out.Problems = append(out.Problems, Problem{Object: ref, Field: field, Reason: c.Reason,
					Message: c.Type + ": " + c.Message, Hint: HintFor(c.Reason), Source: source(t, ref)})
			}
		}
	}
	for nn, st := range t.Result.GatewayClasses {
		add(ObjectRef{Kind: "GatewayClass", Name: nn.Name}, "status.conditions", st.Conditions)
	}
	for _, nn := range sortedKeys(t.Result.Gateways) {
		st := t.Result.Gateways[nn]
		ref := ObjectRef{Kind: "Gateway", Namespace: nn.Namespace, Name: nn.Name}
		add(ref, "status.conditions", st.Conditions)
		for _, l := range st.Listeners {
			add(ref, fmt.Sprintf("status.listeners[%s].conditions", l.Name), l.Conditions)
		}
	}
	for k, st := range t.Result.Routes.All() {
		for i, p := range st.Parents {
			add(ObjectRef{Kind: k.Kind, Namespace: k.Namespace, Name: k.Name}, fmt.Sprintf("status.parents[%d].conditions", i), p.Conditions)
		}
	}
	for k, st := range t.Result.Policies {
		for i, a := range st.Ancestors {
			add(ObjectRef{Kind: k.Kind, Namespace: k.Namespace, Name: k.Name}, fmt.Sprintf("status.ancestors[%d].conditions", i), a.Conditions)
		}
	}
	sortProblems(out.Problems)
	sortProblems(out.Warnings)
	return out
}

// falseMeansBroken says whether c reports something wrong: a positive-polarity condition that
// is False (Conflicted and the like are negative: True is the bad state, and the translator
// reports those as Problems itself).
func falseMeansBroken(c metav1.Condition) bool {
	if c.Status != metav1.ConditionFalse {
		return false
	}
	switch c.Type {
	case string(gwapiv1.RouteConditionAccepted), string(gwapiv1.RouteConditionResolvedRefs),
		string(gwapiv1.GatewayConditionProgrammed), "ModulesAvailable":
		return true
	}
	return false
}

func fromTranslator(t *Translation, p *translator.Problem) Problem {
	ref := ObjectRef{Kind: p.Kind, Namespace: p.Namespace, Name: p.Name}
	return Problem{Object: ref, Field: p.Field, Reason: p.Reason, Message: p.Message, Hint: HintFor(p.Reason), Source: source(t, ref)}
}

func source(t *Translation, ref ObjectRef) string {
	if t.Source == nil {
		return ""
	}
	return t.Source(ref.Kind, ref.Namespace, ref.Name)
}

func sortProblems(ps []Problem) {
	sort.SliceStable(ps, func(i, j int) bool {
		a, b := ps[i], ps[j]
		if a.Object.Kind != b.Object.Kind {
			return a.Object.Kind < b.Object.Kind
		}
		if a.Object.Namespace != b.Object.Namespace {
			return a.Object.Namespace < b.Object.Namespace
		}
		if a.Object.Name != b.Object.Name {
			return a.Object.Name < b.Object.Name
		}
		if a.Field != b.Field {
			return a.Field < b.Field
		}
		return a.Message < b.Message
	})
}

func sortedKeys[V any](m map[types.NamespacedName]V) []types.NamespacedName {
	out := make([]types.NamespacedName, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}
